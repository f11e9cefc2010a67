"""The harness installed as a wheel (not editable), run from another directory: the files
the package reads at run time (the config schema, templates, assets) travel as its data."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, make_workdir

#: what a wheel is built from (the schema's link in src/ points into config/)
BUILD_FILES = ("pyproject.toml", "README.md", "src", "config/config.schema.yaml")


def _installed(tmp_path: Path) -> Path:
    """The harness's wheel, built from a copy of the checkout, unpacked into a folder of
    its own (the venv's other packages serve its dependencies)."""
    tree = tmp_path / "tree"
    for rel in BUILD_FILES:
        source, dest = REPO / rel, tree / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
            shutil.copytree(source, dest, symlinks=True, ignore=ignore)
        else:
            shutil.copy2(source, dest)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "wheel"), str(tree)]
    subprocess.run(build, check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "wheel").glob("ptb_harness-*.whl")
    site = tmp_path / "site"
    install = [*pip, "install", "--no-deps", "--no-compile", "--target", str(site), str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    return site


def test_a_wheel_install_runs_from_any_directory(tmp_path: Path):
    site = _installed(tmp_path)
    schema = site / "ptb_harness/core/config.schema.yaml"
    assert schema.is_file() and not schema.is_symlink()  # a copy of the schema, not the link
    campaign = make_workdir(tmp_path / "campaign")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "CONDOR_CONFIG": os.devnull}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=elsewhere)

    where = run(sys.executable, "-c", "import ptb_harness as h, ptb_scorer as s; print(h.__file__, s.__file__)")
    assert where.returncode == 0 and all(p.startswith(str(site)) for p in where.stdout.split()), where
    help_ = run(sys.executable, "-m", "ptb_harness", "--help")
    assert help_.returncode == 0 and "status" in help_.stdout, help_.stderr
    status = run(sys.executable, "-m", "ptb_harness", "status", "--workdir", str(campaign))
    assert status.returncode == 0 and "not solved yet" in status.stdout, status.stderr
    plan = run(
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(campaign),
        "--profile",
        str(REPO / "profiles/local"),
        "-n",
    )
    assert plan.returncode == 0 and "solve" in plan.stdout, plan.stderr[-2000:]
