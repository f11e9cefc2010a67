"""`ptb-harness status` and the collect tables on a synthetic 20,000-cell results tree,
each as a ratio to its floor measured in the same run.

    python bench/bench_status.py [--cells 20000] [--dir /tmp]

The tree: 90% of cells scored (solve.json, evaluate.json, metrics.json, state records),
5% agent_failed, 5% never run. Floors: listing every cell dir with os.scandir (status),
and reading every cell's three JSON files in a plain loop (collect).
Writes bench/results/status.{csv,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

RESULTS = Path(__file__).parent / "results"
REPO = Path(__file__).resolve().parents[1]


def build(root: Path, n_cells: int) -> None:
    agents = [f"agent{i}" for i in range(10)]
    tasks = [f"task{i}" for i in range(10)]
    models = [f"model{i}" for i in range(4)]
    runs = list(range(1, n_cells // 400 + 1))
    for d in ("agents", "tasks"):
        for name in agents if d == "agents" else tasks:
            (root / d / name).mkdir(parents=True)
            (root / d / name / ("solve.sh" if d == "agents" else "evaluate.py")).write_text("")
    config = {"name": "bench", "agents": agents, "tasks": tasks, "runs": runs, "hours": [10], "num_gpus": [1]}
    config["models"] = [{"name": m, "repo_id": f"org/{m}"} for m in models]
    (root / "config").mkdir()
    (root / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    solve = json.dumps({"status": "exited", "exit_code": 0, "final_model_files": 3, "description": "exited 0"})
    failed = json.dumps({"status": "exited", "exit_code": 3, "final_model_files": 0, "description": "exited 3"})
    state = json.dumps({"stage": "solve", "state": "done", "host": "node1", "pid": 1})
    i = 0
    for a in agents:
        for t in tasks:
            for m in models:
                for r in runs:
                    i += 1
                    cell = root / "results" / "cells" / a / t / m / f"10h-1gpu-run{r}"
                    if i % 20 == 0:
                        continue  # never run
                    cell.mkdir(parents=True)
                    (cell / "solve.state.json").write_text(state)
                    if i % 20 == 1:
                        (cell / "solve.json").write_text(failed)
                        continue
                    (cell / "solve.json").write_text(solve)
                    (cell / "evaluate.json").write_text(json.dumps({"status": "scored", "attempts": [{}]}))
                    (cell / "metrics.json").write_text(json.dumps({"accuracy": (i % 100) / 100}))


FLOOR_LIST = """
import os, sys
n = 0
def walk(p, depth):
    global n
    for e in os.scandir(p):
        if depth == 3:
            n += sum(1 for _ in os.scandir(e.path))
        else:
            walk(e.path, depth + 1)
walk(sys.argv[1] + '/results/cells', 0)
print(n)
"""
FLOOR_READ = """
import json, os, sys
vals = []
def walk(p, depth):
    for e in os.scandir(p):
        if depth == 3:
            for name in ('solve.json', 'evaluate.json', 'metrics.json'):
                try:
                    with open(os.path.join(e.path, name)) as f:
                        vals.append(json.load(f))
                except FileNotFoundError:
                    pass
        else:
            walk(e.path, depth + 1)
walk(sys.argv[1] + '/results/cells', 0)
print(len(vals))
"""


def timed(cmd: list[str], cwd: Path) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=20_000)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        root = Path(d)
        build(root, args.cells)
        cli = [py, "-m", "ptb_harness"]
        rows = []
        # each command once to warm the page cache, then timed
        for label, cmd, floor_label, floor in (
            ("status", [*cli, "status", "--workdir", d], "os.scandir listing", [py, "-c", FLOOR_LIST, d]),
            ("status --targets", [*cli, "status", "--targets", "--workdir", d], "os.scandir listing", None),
            (
                "collect (tables + plots)",
                [*cli, "collect", "--workdir", d],
                "plain JSON read loop",
                [py, "-c", FLOOR_READ, d],
            ),
        ):
            timed(cmd, REPO)
            ours = timed(cmd, REPO)
            if floor is not None:
                timed(floor, REPO)
                floor_s = timed(floor, REPO)
            rows.append((label, ours, floor_label, floor_s, ours / floor_s))
        n_cells = 400 * (args.cells // 400)  # 10 agents x 10 tasks x 4 models x runs
    RESULTS.mkdir(exist_ok=True)
    lines = [f"{n_cells} cells, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}", ""]
    lines += ["| what | seconds | floor | floor seconds | ratio (ours/floor) |", "|---|---|---|---|---|"]
    lines += [f"| {w} | {s:.2f} | {fl} | {fs:.2f} | {r:.1f} |" for w, s, fl, fs, r in rows]
    table = "\n".join(lines)
    print(table)
    (RESULTS / "status.md").write_text(table + "\n")
    (RESULTS / "status.csv").write_text(
        "what,seconds,floor,floor_seconds,ratio\n"
        + "".join(f"{w},{s:.3f},{fl},{fs:.3f},{r:.2f}\n" for w, s, fl, fs, r in rows)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
