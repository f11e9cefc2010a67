"""Hostile agents (and a hostile scorer) in real campaign runs: helpers shared by the
attack tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import REPO


def write_profile(root: Path, **site) -> Path:
    """A copy of the local profile with the given site knobs."""
    profile = root / "profile"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "config.yaml").write_text((REPO / "profiles" / "local" / "config.yaml").read_text())
    base = yaml.safe_load((REPO / "profiles" / "local" / "site.yaml").read_text())
    base["site"].update(site)
    (profile / "site.yaml").write_text(yaml.safe_dump(base))
    return profile


def harness_run(workdir: Path, profile: Path, *args: str, env: dict | None = None, timeout: float = 400):
    """`ptb-harness run` (Snakemake from the frozen snapshot) on workdir."""
    full = {**os.environ, "CONDOR_CONFIG": os.devnull, "PYTHONUNBUFFERED": "1", **(env or {})}
    cmd = [sys.executable, "-m", "ptb_harness", "run", "--workdir", str(workdir), "--profile", str(profile), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full, cwd=workdir)


def ptb(workdir: Path, profile: Path, *args: str) -> str:
    cmd = [sys.executable, "-m", "ptb_harness", *args, "--workdir", str(workdir), "--profile", str(profile)]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout


def delivered(cell: Path) -> list[str]:
    """What reached the cell's final_model (Snakemake's own timestamp file aside)."""
    return sorted(p.name for p in (cell / "final_model").iterdir() if p.name != ".snakemake_timestamp")
