"""Status and collect on a synthetic campaign, and their floors: a plain loop reading the
same metrics.json files (status), a plain loop reading the same JSON records (collect's
tables). Plots are timed on their own. Run through `python bench/run_all.py --only status`.
`python bench/bench_status.py --slowfs-ms 1` runs status over bench/slowfs.py's latency
against parallel read loops of the same files (see bench/README.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

_WALK = """
import json, os, sys
vals = []
def walk(p, depth):
    for e in os.scandir(p):
        if depth == 3:
            for name in NAMES:
                try:
                    with open(os.path.join(e.path, name), 'rb') as f:
                        data = f.read()
                        vals.append(json.loads(data) if name.endswith('.json') else data.split(b'\t'))
                except FileNotFoundError:
                    pass
        else:
            walk(e.path, depth + 1)
walk(sys.argv[1] + '/results/cells', 0)
print(len(vals))
"""
#: what status reads of a scored cell: metrics.json, the evaluate.json that vouches for it,
#: judgement.json (opened, most often not there), and whether judgement_override.json and
#: solve.json exist (issue 39: a floor that reads the same files); the floors below share it
_READ_CELL = """
import json, os, sys
def cell(p):
    vals = []
    for name in ('metrics.json', 'evaluate.json', 'judgement.json'):
        try:
            with open(os.path.join(p, name), 'rb') as f:
                vals.append(json.loads(f.read()))
        except FileNotFoundError:
            pass
    override, solve = os.path.join(p, 'judgement_override.json'), os.path.join(p, 'solve.json')
    vals.append((os.path.lexists(override), os.path.exists(solve)))
    return vals
"""
FLOOR_STATUS = (
    _READ_CELL
    + """
vals = []
def walk(p, depth):
    for e in os.scandir(p):
        vals.extend(cell(e.path)) if depth == 3 else walk(e.path, depth + 1)
walk(sys.argv[1] + '/results/cells', 0)
print(len(vals))
"""
)
#: the floor of earlier runs: metrics.json alone
FLOOR_STATUS_METRICS_ONLY = "NAMES = ('metrics.json',)\n" + _WALK
#: collect's tables read every cell's records, and its stages' benchmarks
FLOOR_COLLECT = (
    "NAMES = ('solve.json', 'evaluate.json', 'metrics.json', 'solve.state.json',"
    " 'solve.benchmark.tsv', 'evaluate.benchmark.tsv')\n" + _WALK
)
#: collect's tables alone (the CLI writes the plots too), with collect's index as it is
TABLES_WARM = """
import sys
from ptb_harness.core.layout import collect_outputs
from ptb_harness.campaign.config import load_config_files
from ptb_harness.results.collect import write_tables
campaign = load_config_files(sys.argv[1])
write_tables(campaign, collect_outputs(campaign.results_dir))
"""


def _without_index(module: str, name: str) -> str:
    """Code that removes an index (module.name: its file's name) from the campaign dir
    sys.argv[1] names: a campaign's first run of the command that keeps it."""
    return f"""
import os, sys
from {module} import {name}
index = os.path.join(sys.argv[1], "results", {name})
os.path.exists(index) and os.unlink(index)
"""


def _cli(command: str) -> str:
    """Code that runs `ptb-harness COMMAND --workdir sys.argv[1]` in this process."""
    return f"""
import runpy, sys
sys.argv = ["ptb-harness", "{command}", "--workdir", sys.argv[1]]
runpy.run_module("ptb_harness", run_name="__main__")
"""


_NO_COLLECT_INDEX = _without_index("ptb_harness.results.collect", "COLLECT_INDEX")
#: collect's tables alone, with no index
TABLES_ONLY = _NO_COLLECT_INDEX + TABLES_WARM
#: `ptb-harness collect` (tables and plots), with no index
COLLECT_COLD = _NO_COLLECT_INDEX + _cli("collect")

#: the same, with each cell's stage benchmarks not read (their columns left unknown): the
#: floor of what reading them costs
TABLES_WITHOUT_BENCHMARKS = TABLES_ONLY.replace(
    "from ptb_harness.results.collect import write_tables",
    "import ptb_harness.results.collect as collect\n"
    "from ptb_harness.results.collect import write_tables\n"
    "collect.cell_stage_benchmarks = lambda cell_dir, files: dict.fromkeys(collect.STAGE_BENCHMARK_COLUMNS)",
)


#: `ptb-harness status` with no status index (removed first: a campaign's first status)
STATUS_COLD = _without_index("ptb_harness.results.status_index", "STATUS_INDEX") + _cli("status")
#: one scandir walk of the cell dirs: what a second status of an unchanged campaign is
#: held to (issue 39: <= 1.5x)
FLOOR_WALK = """
import os, sys
def walk(p, depth):
    return sum(1 for _ in os.scandir(p)) if depth == 4 else sum(walk(e.path, depth + 1) for e in os.scandir(p))
print(walk(sys.argv[1] + '/results/cells', 0))
"""


def commands(d: str | Path) -> list[tuple[str, list[str], str, list[str]]]:
    """(label, command, floor label, floor command) for a campaign dir."""
    py, d = sys.executable, str(d)
    cli = [py, "-m", "ptb_harness"]
    return [
        ("status", [py, "-c", STATUS_COLD, d], "read loop of the files status reads", [py, "-c", FLOOR_STATUS, d]),
        ("status", [py, "-c", STATUS_COLD, d], "metrics.json read loop", [py, "-c", FLOOR_STATUS_METRICS_ONLY, d]),
        ("status, its index warm", [*cli, "status", "--workdir", d], "one scandir walk", [py, "-c", FLOOR_WALK, d]),
        ("collect, tables only", [py, "-c", TABLES_ONLY, d], "records read loop", [py, "-c", FLOOR_COLLECT, d]),
        ("collect, tables, index warm", [py, "-c", TABLES_WARM, d], "no index", [py, "-c", TABLES_ONLY, d]),
        ("collect (tables + plots)", [py, "-c", COLLECT_COLD, d], "tables only", [py, "-c", TABLES_ONLY, d]),
        (
            "collect, tables only, stage benchmarks read",
            [py, "-c", TABLES_ONLY, d],
            "benchmarks not read",
            [py, "-c", TABLES_WITHOUT_BENCHMARKS, d],
        ),
    ]


#: the files status reads of each cell, read by THREADS threads (a parallel read loop: the
#: floor of status on a filesystem with latency, where reads wait rather than compute)
FLOOR_STATUS_THREADS = (
    _READ_CELL
    + """
from concurrent.futures import ThreadPoolExecutor
THREADS = int(sys.argv[2])
def cell_dirs(p, depth):
    for e in os.scandir(p):
        if depth == 3:
            yield e.path
        else:
            yield from cell_dirs(e.path, depth + 1)
dirs = list(cell_dirs(sys.argv[1] + '/results/cells', 0))
with ThreadPoolExecutor(THREADS) as pool:
    print(sum(len(v) for v in pool.map(cell, dirs)))
"""
)


def _timed(cmd: list[str]) -> float:
    import subprocess
    import time

    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def slowfs_status(cells: int, delay_ms: float, threads: tuple[int, ...] = (1, 8, 16, 32)) -> dict:
    """Status on a campaign read through bench/slowfs.py (``delay_ms`` a filesystem call)
    against parallel read loops of the same files at each of ``threads``: issue 39's goal,
    status within 1.5x of the best of them. Needs fusepy and libfuse2 (bench/README.md)."""
    import subprocess
    import tempfile
    import time

    from synthetic import build_campaign

    py, here = sys.executable, Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory(prefix="ptb-slowfs-") as tmp:
        source, mount = Path(tmp) / "campaign", Path(tmp) / "mnt"
        source.mkdir()
        mount.mkdir()
        build_campaign(source, cells, 0.9)
        fs = subprocess.Popen([py, str(here / "slowfs.py"), str(source), str(mount), str(delay_ms)])
        try:
            deadline = time.monotonic() + 30
            while not (mount / "config").exists():
                if time.monotonic() > deadline or fs.poll() is not None:
                    raise RuntimeError("bench/slowfs.py did not mount")
                time.sleep(0.1)
            status_s = _timed([py, "-m", "ptb_harness", "status", "--workdir", str(mount)])
            loops = {n: _timed([py, "-c", FLOOR_STATUS_THREADS, str(mount), str(n)]) for n in threads}
        finally:
            subprocess.run(["fusermount", "-u", str(mount)], check=False)
            fs.wait(timeout=30)
    best = min(loops, key=loops.__getitem__)
    return {
        "cells": cells,
        "delay_ms": delay_ms,
        "status_s": round(status_s, 2),
        "read_loop_s_by_threads": {str(n): round(s, 2) for n, s in loops.items()},
        "best_threads": best,
        "ratio_status_over_best_loop": round(status_s / loops[best], 2),
    }


def main() -> None:
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slowfs-ms", type=float, default=1.0, help="latency of each filesystem call")
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = slowfs_status(args.cells, args.slowfs_ms)
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
