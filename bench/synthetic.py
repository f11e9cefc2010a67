"""Synthetic campaigns for the benchmarks: a working dir with N cells and, for a fraction,
every file a finished cell has (so Snakemake sees them done and status sees them scored)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import yaml

AGENTS, MODELS = 10, 4


def dims(n_cells: int) -> tuple[int, int]:
    """(tasks, runs) with 10 agents x 4 models x tasks x runs == n_cells."""
    runs = 5 if n_cells <= 5000 else 10
    tasks, rest = divmod(n_cells, AGENTS * MODELS * runs)
    if rest or not tasks:
        raise ValueError(f"{n_cells} cells: use a multiple of {AGENTS * MODELS * runs}")
    return tasks, runs


def monitor_csv(rows: int, seed: int, stages: tuple[str, ...] = ("solve", "evaluate")) -> str:
    """A gpu_monitor.csv as the GPU monitor writes it (one GPU, a sample every 30 s),
    `rows` samples split over the stages; utilisation varies with the seed."""
    lines = ["time,stage,gpu_index,gpu_uuid,utilization_pct,memory_used_mib,memory_total_mib,power_w,n_processes,pids"]
    per_stage = rows // len(stages)
    t0 = 1_764_000_000
    for s, stage in enumerate(stages):
        for k in range(per_stage):
            t = t0 + 30 * (s * per_stage + k)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
            util = (seed * 7 + k * 13) % 101 if (seed + k) % 5 else 0
            mem = 20000 + (seed * 31 + k) % 60000
            lines.append(f"{stamp},{stage},0,GPU-{seed:08x},{util},{mem},143771,{300 + util},1,{1000 + seed}")
    return "\n".join(lines) + "\n"


#: Snakemake's benchmark of a job (the rules' `benchmark:`), as a finished stage leaves it
BENCHMARK = (
    "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    "{s}\t0:00:00\t2048.50\t9000.00\t1900.00\t1950.00\t10.00\t20.00\t95.00\t{cpu}\n"
)


def build_campaign(
    root: Path, n_cells: int, scored: float = 0.9, monitor_rows: int = 0, benchmarks: bool = True
) -> dict:
    """Write <root>/config/config.yaml, agents, tasks and the cells' files; returns the config.

    Cells are numbered in campaign order; of every 20, the first 20*(1-scored)/2 have an
    agent that left no model, as many were never run, and the rest are scored. With
    benchmarks, each finished stage (solve of every cell that ran, evaluate of the scored)
    has its benchmark file."""
    tasks, runs = dims(n_cells)
    agents = [f"agent{i}" for i in range(AGENTS)]
    task_names = [f"task{i}" for i in range(tasks)]
    models = [f"model{i}" for i in range(MODELS)]
    for name in agents:
        (root / "agents" / name).mkdir(parents=True, exist_ok=True)
        (root / "agents" / name / "solve.sh").write_text("exit 0\n")
    for name in task_names:
        (root / "tasks" / name).mkdir(parents=True, exist_ok=True)
        (root / "tasks" / name / "evaluate.py").write_text("")
    config = {
        "name": "bench",
        "agents": agents,
        "tasks": task_names,
        "models": [{"name": m, "repo_id": f"org/{m}"} for m in models],
        "hours": [10],
        "num_gpus": [1],
        "runs": list(range(1, runs + 1)),
    }
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    unscored_per_20 = round(20 * (1 - scored))
    solve = json.dumps({"status": "exited", "exit_code": 0, "final_model_files": 1, "description": "exited 0"})
    failed = json.dumps({"status": "exited", "exit_code": 3, "final_model_files": 0, "description": "exited 3"})
    state = json.dumps({"stage": "solve", "state": "done", "host": "node1", "pid": 1})
    i = 0
    for a in agents:
        for t in task_names:
            for m in models:
                for r in config["runs"]:
                    i += 1
                    k = i % 20
                    if k < unscored_per_20 / 2:
                        continue  # never run
                    cell = root / "results" / "cells" / a / t / m / f"10h-1gpu-run{r}"
                    (cell / "final_model").mkdir(parents=True)
                    (cell / "solve.state.json").write_text(state)
                    (cell / "solve_out.txt").write_text("agent done\n")
                    if benchmarks:
                        (cell / "solve.benchmark.tsv").write_text(BENCHMARK.format(s=36000 - i, cpu=72000 + i))
                    if monitor_rows:
                        (cell / "gpu_monitor.csv").write_text(monitor_csv(monitor_rows, i))
                    if k < unscored_per_20:
                        (cell / "solve.json").write_text(failed)
                        continue
                    (cell / "final_model" / "config.json").write_text("{}")
                    (cell / "solve.json").write_text(solve)
                    for name in ("solve_parsed.txt", "solve_out_sanitized.txt", "solve_parsed_sanitized.txt"):
                        (cell / name).write_text("agent done\n")
                    metrics = json.dumps({"accuracy": (i % 100) / 100})
                    digest = hashlib.sha256(metrics.encode()).hexdigest()
                    ev = {"status": "scored", "attempts": [{}], "accuracy": (i % 100) / 100, "metrics_sha256": digest}
                    (cell / "evaluate.json").write_text(json.dumps(ev))
                    (cell / "metrics.json").write_text(metrics)
                    if benchmarks:
                        (cell / "evaluate.benchmark.tsv").write_text(BENCHMARK.format(s=600 + i, cpu=500 + i))
    return config
