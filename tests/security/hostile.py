"""Hostile agents (and a hostile scorer) in real campaign runs: helpers shared by the
attack tests."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
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


def harness_run(
    workdir: Path, profile: Path, *args: str, env: dict | None = None, timeout: float = 400, python: str | None = None
):
    """`ptb-harness run` (Snakemake from the frozen snapshot) on workdir, by ``python``
    (this interpreter by default)."""
    full = {**os.environ, "CONDOR_CONFIG": os.devnull, "PYTHONUNBUFFERED": "1", **(env or {})}
    python = python or sys.executable
    cmd = [python, "-m", "ptb_harness", "run", "--workdir", str(workdir), "--profile", str(profile), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full, cwd=workdir)


def ptb(workdir: Path, profile: Path, *args: str) -> str:
    cmd = [sys.executable, "-m", "ptb_harness", *args, "--workdir", str(workdir), "--profile", str(profile)]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout


def delivered(cell: Path) -> list[str]:
    """What reached the cell's final_model (Snakemake's own timestamp file aside)."""
    return sorted(p.name for p in (cell / "final_model").iterdir() if p.name != ".snakemake_timestamp")


def tmp_venv(root: Path) -> Path:
    """A venv under ``root`` that sees this one's packages (the harness and its
    dependencies), as a checkout under /tmp has one; its python."""
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
