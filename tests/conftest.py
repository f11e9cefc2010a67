"""Shared helpers: a campaign working directory with fast fake agents and tasks, and a
way to run the real workflow on it with the real Snakemake (in a subprocess)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]

# Agents that finish in well under a second; each leaves what its name says.
FAKE_AGENTS = {
    "exit0": """
        mkdir -p final_model && echo '{"score": 0.75}' > final_model/config.json
        echo "agent done"
    """,
    "exit3": """
        echo "giving up"; exit 3
    """,
    "selfkill": """
        mkdir -p final_model && echo x > final_model/weights.bin
        kill -KILL $$
    """,
    "overrun": """
        trap 'echo "TERM ignored"' TERM
        mkdir -p final_model && echo x > final_model/weights.bin
        while true; do sleep 0.1; done
    """,
}

# A scorer that reads the score the fake agent left, and one that never writes metrics.
FAKE_EVALUATE = """
    import argparse, json, pathlib, sys
    print("argv:", " ".join(sys.argv[1:]))
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path"); ap.add_argument("--json-output-file")
    ap.add_argument("--max-tokens", type=int)
    a = ap.parse_args()
    cfg = pathlib.Path(a.model_path, "config.json")
    score = json.loads(cfg.read_text()).get("score", 0.5) if cfg.exists() else 0.5
    pathlib.Path(a.json_output_file).write_text(json.dumps({"accuracy": score, "stderr": 0.01}))
"""
BROKEN_EVALUATE = """
    import sys
    print("argv:", " ".join(sys.argv[1:]))
    sys.exit("scorer crashed")
"""
BROKEN_LADDER = {
    "evaluate": {
        "ladder": [
            {"attempts": 2, "max_tokens": None},
            {"attempts": 1, "max_tokens": 100},
            {"attempts": 1, "max_tokens": 50},
        ]
    }
}


def write_agent(root: Path, name: str, body: str) -> None:
    d = root / "agents" / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "solve.sh").write_text("#!/usr/bin/env bash\n" + textwrap.dedent(body))


def write_task(root: Path, name: str, evaluate: str, info: dict | None = None) -> None:
    d = root / "tasks" / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "evaluate.py").write_text(textwrap.dedent(evaluate))
    (d / "benchmark.txt").write_text(f"{name} benchmark\n")
    if info is not None:
        (d / "info.json").write_text(json.dumps(info))


def campaign_config(**overrides) -> dict:
    config = {
        "agents": ["exit0"],
        "tasks": ["fake"],
        "models": [{"name": "m1", "path": "models/m1"}],
        "hours": [0.0005],
        "num_gpus": [0],
        "runs": [1],
        "solve": {"timeout_margin_minutes": 0, "kill_grace_seconds": 1},
        # the fake tasks are no PostTrainBench tasks: the default rules (ptb-v1.2) would average none
        "leaderboard": {"rules": "custom"},
    }
    config.update(overrides)
    return config


def make_workdir(root: Path, config: dict | None = None) -> Path:
    """A campaign working dir: config/config.yaml, fake agents and tasks, a fake model."""
    for name, body in FAKE_AGENTS.items():
        write_agent(root, name, body)
    write_task(root, "fake", FAKE_EVALUATE)
    write_task(root, "broken", BROKEN_EVALUATE, BROKEN_LADDER)
    for m in ("m1", "m2"):
        (root / "models" / m).mkdir(parents=True, exist_ok=True)
        (root / "models" / m / "config.json").write_text("{}")
    write_config(root, config or campaign_config())
    return root


#: evaluate.json of a scored cell: it vouches for metrics.json {"accuracy": 0.5} by its hash
VOUCHED = {
    "status": "scored",
    "accuracy": 0.5,
    "metrics_sha256": hashlib.sha256(json.dumps({"accuracy": 0.5}).encode()).hexdigest(),
}


def scored_campaign(root: Path, runs: int) -> tuple[Any, list[Path]]:
    """A campaign under root of ``runs`` cells, each scored (solve.json, metrics.json,
    evaluate.json), and the cells' dirs."""
    from ptb_harness.campaign.cells import Cell
    from ptb_harness.campaign.config import load_config_files

    make_workdir(root, campaign_config(runs=list(range(1, runs + 1))))
    campaign = load_config_files(root)
    solved = {"status": "exited", "exit_code": 0, "final_model_files": 1, "description": "exited with code 0"}
    dirs = []
    for run in range(1, runs + 1):
        d = campaign.cell_dir(Cell("exit0", "fake", "m1", "0.0005", 0, run))
        d.mkdir(parents=True)
        files = {"solve.json": solved, "metrics.json": {"accuracy": 0.5}, "evaluate.json": VOUCHED}
        for name, record in files.items():
            (d / name).write_text(json.dumps(record))
        dirs.append(d)
    return campaign, dirs


def rewrite_in_place(path: Path, text: str) -> None:
    """Rewrite a file in place (same inode) with text of the same size, its mtime set back:
    only its ctime, which no process can set, shows the change."""
    st = path.stat()
    assert len(text.encode()) == st.st_size, "the same size, or the size shows the change"
    time.sleep(0.01)
    with open(path, "r+") as f:
        f.write(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def write_config(root: Path, config: dict) -> None:
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "config.yaml").write_text(yaml.safe_dump(config))


def snakemake(
    workdir: Path, *args: str, timeout: float = 300, profile: str = "local", profile_dir: Path | None = None
) -> subprocess.CompletedProcess:
    """Run the real workflow on workdir with the repo's profile; returns the finished process."""
    env = {**os.environ, "CONDOR_CONFIG": os.devnull, "PYTHONUNBUFFERED": "1"}
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--profile",
        str(profile_dir or REPO / "profiles" / profile),
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=workdir)


def cell_dir(workdir: Path, agent: str, task: str = "fake", model: str = "m1", hours: str = "0.0005") -> Path:
    return workdir / "results" / "cells" / agent / task / model / f"{hours}h-0gpu-run1"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return make_workdir(tmp_path / "campaign")


# -- a faked NVIDIA driver (tests of the bwrap GPU fence) ---------------------------------

INFORMATION = """Model: \t\t NVIDIA H200
IRQ:   \t\t 147
GPU UUID: \t GPU-{uuid}
Video BIOS: \t 96.00.a5.00.01
Bus Type: \t PCIe
DMA Size: \t 52 bits
DMA Mask: \t 0xfffffffffffff
Bus Location: \t {bus}
Device Minor: \t {minor}
GPU Excluded:\t No
"""
#: three cards as the driver lists them; the minors are not the bus order
CARDS = [("0000:18:00.0", "aaaa1111", 2), ("0000:2a:00.0", "bbbb2222", 0), ("0000:3a:00.0", "cccc3333", 1)]


def fake_nvidia_root(root: Path) -> Path:
    """A STAND-IN for a node's NVIDIA driver (no GPU exists here or in CI), for the bwrap
    GPU fence (site.gpu_device_root): dev/nvidia{0,1,2}, nvidiactl, nvidia-uvm, nvidia-uvm-tools (no nvidia-modeset: a
    headless node) and proc/driver/nvidia/gpus/<bus>/information for the three cards."""
    (root / "dev").mkdir(parents=True)
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        path = root / "dev" / name
        if os.geteuid() == 0:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
        else:
            path.write_text("")
    for bus, uuid, minor in CARDS:
        d = root / "proc/driver/nvidia/gpus" / bus
        d.mkdir(parents=True)
        (d / "information").write_text(INFORMATION.format(uuid=uuid, bus=bus, minor=minor))
    return root


# A test that runs the harness's process supervision in this process (run_budgeted) makes
# it a child subreaper, for good: every later test's orphans (a SIGKILLed Snakemake's jobs)
# would be re-parented here and stay zombies, alive to kill(pid, 0). Each test leaves this
# process as it found it.
_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


@pytest.fixture(autouse=True)
def _no_subreaper_left_behind() -> Iterator[None]:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    yield
    flag = ctypes.c_int(0)
    if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value:
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


# -- the two test workers (pytest-xdist, pyproject's addopts) ------------------------------
# Slow files first, so that the two workers end together: with a test file to a worker, a
# slow file handed out last would run alone at the end.
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: order kept within


# -- where the suite's CPU goes (opt-in: PTB_TEST_CPU=<dir>) --------------------------------
# Each worker appends one JSON line a test: its wall time and the CPU this process and its
# waited-for children spent in it (a daemon's or a Slurm job's CPU is not seen). CI's time
# on two cores is bounded by the CPU the suite burns, not by its wall time (docs/development.md).
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    out = os.environ.get("PTB_TEST_CPU")
    if not out:
        yield
        return
    import resource

    def cpu() -> tuple[float, float]:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime

    start, (own0, kids0) = time.monotonic(), cpu()
    yield
    own1, kids1 = cpu()
    line = {"test": item.nodeid, "wall_s": round(time.monotonic() - start, 3)}
    line |= {"cpu_own_s": round(own1 - own0, 3), "cpu_children_s": round(kids1 - kids0, 3)}
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(out).mkdir(parents=True, exist_ok=True)  # a dir that is not there yet is made, not an internal error
    with open(Path(out) / f"cpu-{worker}.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")
