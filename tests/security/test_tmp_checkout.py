"""A harness whose interpreter (venv) lives under /tmp, as a checkout there has it: real
cells under bwrap and none (`ptb-harness run`, the real Snakemake).

Before, bwrap bound the job's tmp over /tmp after the interpreter, hiding the venv, and
every cell failed with `python: command not found`. The campaign dir (and so the frozen
harness snapshot) is under /tmp too, as in every test here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig

import pytest
from conftest import campaign_config, make_workdir, write_agent, write_config
from hostile import ptb, write_profile

pytestmark = pytest.mark.slow

AGENT = """
python -c 'import sys; print("PYTHON", sys.prefix)'
mkdir -p final_model && echo '{}' > final_model/config.json
"""


def tmp_venv(root):
    """A venv under /tmp that sees this one's packages (the harness and its dependencies)."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site_packages = sysconfig.get_paths()["purelib"]
    purelib = subprocess.run(
        [str(venv / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # a .pth line that starts with `import` runs: this venv's site dir gets the other's
    (venv / purelib.removeprefix(str(venv) + "/") / "harness.pth").write_text(
        f"import site; site.addsitedir({site_packages!r})\n"
    )
    return venv / "bin/python"


@pytest.mark.parametrize("runtime", ["bwrap", "none"])
def test_a_harness_venv_under_tmp_runs_its_cells(tmp_path, runtime):
    assert str(tmp_path).startswith("/tmp/")
    python = tmp_venv(tmp_path)
    workdir = make_workdir(tmp_path / "campaign")
    write_agent(workdir, "probe", AGENT)
    write_config(workdir, campaign_config(agents=["probe"], hours=[0.002]))
    profile = write_profile(tmp_path, runtime=runtime, solve_resources={"cpus": 1}, evaluate_resources={"cpus": 1})
    env = {**os.environ, "CONDOR_CONFIG": os.devnull, "PYTHONUNBUFFERED": "1"}
    cmd = [str(python), "-m", "ptb_harness", "run", "--workdir", str(workdir), "--profile", str(profile)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env, cwd=workdir)
    cells = {c["agent"]: c for c in json.loads(ptb(workdir, profile, "status", "--json"))["cells"]}
    assert cells["probe"]["outcome"] == "scored", (cells["probe"], run.stderr[-3000:])
    trace = (workdir / "results/cells/probe/fake/m1/0.002h-0gpu-run1/solve_out.txt").read_text()
    assert f"PYTHON {python.parent.parent}" in trace, trace
