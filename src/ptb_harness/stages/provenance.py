"""A cell's provenance.json: everything needed to say which code, config, container,
machine and scorer packages produced its score.

Written by evaluate after its last attempt (scored or not); not a Snakemake output, so
a failed evaluation keeps it too.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import Cell
from ptb_harness.core.cell_files import SolveRecord
from ptb_harness.core.records import atomic_write_json, read_json_dict
from ptb_harness.runtime.snapshot import provenance as harness_provenance

#: The scorer packages whose versions are recorded (those present in the scorer's environment).
SCORER_PACKAGES = (
    "torch",
    "transformers",
    "vllm",
    "lm_eval",
    "inspect_ai",
    "datasets",
    "accelerate",
    "tokenizers",
    "numpy",
    "flash_attn",
)
_VERSIONS = (
    "import importlib.metadata as m, json, sys\n"
    "out = {'python': sys.version.split()[0]}\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n        out[name] = m.version(name)\n"
    "    except m.PackageNotFoundError:\n        pass\n"
    "print('PTB_VERSIONS ' + json.dumps(out))\n"
)


def versions_command(python: str = "python") -> list[str]:
    """A command printing the versions of SCORER_PACKAGES with the `python` evaluate.py runs with."""
    return [python, "-c", _VERSIONS, *SCORER_PACKAGES]


def parse_versions(output: str) -> dict[str, str]:
    for line in output.splitlines():
        if line.startswith("PTB_VERSIONS "):
            return json.loads(line.removeprefix("PTB_VERSIONS "))
    return {}


def scorer_versions(argv: Sequence[str], env: dict[str, str], cwd: str | Path, timeout_s: float = 60) -> dict:
    """Run the versions command (already wrapped for the sandbox): the versions it printed,
    or {"error": ...} when it could not start, failed or hung."""
    try:
        res = subprocess.run(list(argv), env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    return parse_versions(res.stdout) or {"error": f"exit {res.returncode}: {res.stderr.strip()[-300:]}"}


def image_digest(path: str | None, cache_file: Path) -> dict[str, Any] | None:
    """sha256 of a container image file, cached by (path, size, mtime): images are GBs."""
    if not path:
        return None
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        return {"path": path, "error": e.strerror}
    if p.is_dir():  # a sandbox directory: no single digest
        return {"path": path, "kind": "directory"}
    key = f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    cache = read_json_dict(cache_file) or {}
    if key not in cache:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
        cache[key] = h.hexdigest()
        atomic_write_json(cache_file, cache)
    return {"path": path, "sha256": cache[key], "bytes": st.st_size}


def driver_version(nvml: Any | None) -> str | None:
    if nvml is None:
        return None
    try:
        v = nvml.nvmlSystemGetDriverVersion()
    except Exception:  # recorded as unknown, never fails the stage
        return None
    return v.decode() if isinstance(v, bytes) else str(v)


def cell_provenance(
    campaign: Campaign,
    cell: Cell,
    *,
    solve: SolveRecord | None,
    gpus: Sequence[Any],
    nvml: Any | None,
    scorer_packages: dict,
) -> dict[str, Any]:
    site = campaign.settings.site
    cache = campaign.results_dir / ".image-digests.json"
    apptainer = site.runtime.runtime == "apptainer"
    harness = harness_provenance()
    git = harness.get("git") or ""
    return {
        "cell": cell.wildcards,
        "harness": {
            "git_commit": git.removesuffix("+dirty") or None,
            "git_dirty": git.endswith("+dirty") if git else None,
            "workflow_digest": harness.get("digest"),
            "snapshot": harness.get("snapshot"),
        },
        "config": {
            "model_to_train": campaign.model_source(cell.model),
            "budget_s": cell.budget_seconds,
            "solve": campaign.settings.solve.record(),
            "evaluate": campaign.settings.evaluate.record(),
            "agent_config": campaign.agent_config(cell.agent),
            "site": site.record(),
        },
        "containers": {
            "agent_image": image_digest(site.runtime.agent_image, cache) if apptainer else None,
            "scorer_image": image_digest(site.runtime.scorer_image, cache) if apptainer else None,
        },
        "solve": {
            "host": solve.host if solve else None,
            "gpus": solve.gpus if solve else None,
            "scheduler": solve.scheduler if solve else None,
            "harness": solve.harness if solve else None,
        },
        "evaluate": {
            "host": socket.gethostname(),
            "platform": platform.platform(),
            "gpus": [{"index": g.index, "uuid": g.uuid, "name": g.name} for g in gpus],
            "driver": driver_version(nvml),
            "pid": os.getpid(),
        },
        "scorer_packages": scorer_packages,
    }
