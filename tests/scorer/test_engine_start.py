"""What a scorer process pays for before it scores: inspect_ai loads no other package's
plugins (ptb_scorer.engine.skip_other_plugins), so inspect_evals' registry, which imports
each of its evals, is never imported. Each case runs in a fresh interpreter (its modules
are what the check is about)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

#: what an eval's start does (inspect_ai.hooks._startup), with or without the scorer's
#: engine set up first; prints whether inspect_evals' registry got imported
CHECK = """
import sys
if sys.argv[1] == "engine":
    from ptb_scorer import engine
    engine.skip_other_plugins()
from inspect_ai._util.entrypoints import ensure_entry_points
ensure_entry_points()
print("inspect_evals._registry" in sys.modules)
"""


def registry_imported(mode: str) -> bool:
    res = subprocess.run(
        [sys.executable, "-c", CHECK, mode], cwd=REPO / "src", capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip() == "True"


def test_inspect_loads_no_other_packages_plugins_in_the_scorer():
    assert registry_imported("plain"), "inspect_ai no longer loads inspect_evals' registry: this check is moot"
    assert not registry_imported("engine")


def test_register_sets_it_up():
    """Every engine path (load_model, run_task) goes through register."""
    code = (
        "from ptb_scorer import engine\n"
        "from inspect_ai._util import entrypoints\n"
        "class S: backend = 'vllm'\n"
        "engine.register(S())\n"
        "print(entrypoints._inspect_ai_eps_loaded_all)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO / "src", capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "True", res.stderr[-2000:]
