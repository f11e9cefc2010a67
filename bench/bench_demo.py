"""The demo campaign (README command 1's campaign: noop and demo_sft on the tiny model,
the real sandbox, scorer and tables) on this machine's cores idle, and again with every
core kept busy by a CPU-bound process this bench starts (one per core, each bounded by
its own deadline and stopped by its PID), in one run (issue 55).

    .venv/bin/python bench/bench_demo.py [--out FILE.json]

Each run is a fresh working directory (the tiny base model built anew), timed from
Snakemake's start to its exit. Prints, per run: demo_sft's accuracy, the base model's
(noop), the wall time, and what demo_sft's training log says (the steps it took and
whether it reached its target); then the busy run's time over the idle one's. Goals:
demo_sft >= 0.8 in both, the busy run within 1.5x of the idle one and under 6 minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
#: a busy process's own deadline: it ends by itself even if this bench is killed
HOG_SECONDS = 900
#: a CPU-bound process's code
HOG = f"import time\nend = time.monotonic() + {HOG_SECONDS}\nwhile time.monotonic() < end: pass"


@contextlib.contextmanager
def busy_cores(count: int) -> Iterator[list[int]]:
    """``count`` CPU-bound processes for the block's duration, stopped by their PIDs."""
    hogs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import time\nend = time.monotonic() + {HOG_SECONDS}\nwhile time.monotonic() < end: pass",
            ]
        )
        for _ in range(count)
    ]
    try:
        yield [h.pid for h in hogs]
    finally:
        for hog in hogs:
            hog.terminate()
        for hog in hogs:
            hog.wait()


def demo_run(root: Path) -> dict:
    """The demo campaign in a fresh working dir under root: accuracy, wall time, training log."""
    workdir = root / "campaign"
    (workdir / "config").mkdir(parents=True)
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["paths"] = {"agents_dir": str(REPO / "agents"), "tasks_dir": str(REPO / "tasks")}
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    cmd += ["--profile", str(REPO / "profiles" / "local")]
    env = {**os.environ, "CONDOR_CONFIG": os.devnull}
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir, timeout=900)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"the demo campaign failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    import pandas as pd

    cells = pd.read_csv(workdir / "results" / "tables" / "cells.csv").set_index("agent")
    out = next((workdir / "results" / "cells" / "demo_sft").rglob("solve_out.txt")).read_text()
    said = [line for line in out.splitlines() if re.search(r"\] (reached|time budget spent) ", line)]
    return {
        "wall_s": round(wall, 1),
        "demo_sft_accuracy": float(cells.loc["demo_sft", "accuracy"]),
        "noop_accuracy": float(cells.loc["noop", "accuracy"]),
        "training": said[-1] if said else "(no line of the training's end)",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    result: dict = {"cores": cores, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    with tempfile.TemporaryDirectory(prefix="ptb-bench-demo-") as tmp:
        result["idle"] = demo_run(Path(tmp) / "idle")
        print("idle", json.dumps(result["idle"]), flush=True)
        with busy_cores(cores) as pids:
            result["busy"] = {**demo_run(Path(tmp) / "busy"), "busy_processes": len(pids)}
        print("busy", json.dumps(result["busy"]), flush=True)
    result["ratio_busy_over_idle"] = round(result["busy"]["wall_s"] / result["idle"]["wall_s"], 2)
    print("busy / idle wall time:", result["ratio_busy_over_idle"])
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
