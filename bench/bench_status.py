"""Status and collect on a synthetic campaign, and their floors: a plain loop reading the
same metrics.json files (status), a plain loop reading the same JSON records (collect's
tables). Plots are timed on their own. Run through `python bench/run_all.py --only status`;
bench/slowfs.py adds filesystem latency (see bench/README.md).
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
#: solve.json exist (issue 39: a floor that reads the same files)
FLOOR_STATUS = """
import json, os, sys
vals = []
def cell(p):
    for name in ('metrics.json', 'evaluate.json', 'judgement.json'):
        try:
            with open(os.path.join(p, name), 'rb') as f:
                vals.append(json.loads(f.read()))
        except FileNotFoundError:
            pass
    override, solve = os.path.join(p, 'judgement_override.json'), os.path.join(p, 'solve.json')
    vals.append((os.path.lexists(override), os.path.exists(solve)))
def walk(p, depth):
    for e in os.scandir(p):
        cell(e.path) if depth == 3 else walk(e.path, depth + 1)
walk(sys.argv[1] + '/results/cells', 0)
print(len(vals))
"""
#: the floor of earlier runs: metrics.json alone
FLOOR_STATUS_METRICS_ONLY = "NAMES = ('metrics.json',)\n" + _WALK
#: collect's tables read every cell's records, and its stages' benchmarks
FLOOR_COLLECT = (
    "NAMES = ('solve.json', 'evaluate.json', 'metrics.json', 'solve.state.json',"
    " 'solve.benchmark.tsv', 'evaluate.benchmark.tsv')\n" + _WALK
)
#: collect's tables alone (the CLI writes the plots too)
TABLES_ONLY = """
import sys
from ptb_harness.core.layout import collect_outputs
from ptb_harness.campaign.config import load_config_files
from ptb_harness.results.collect import write_tables
campaign = load_config_files(sys.argv[1])
write_tables(campaign, collect_outputs(campaign.results_dir))
"""

#: the same, with each cell's stage benchmarks not read (their columns left unknown): the
#: floor of what reading them costs
TABLES_WITHOUT_BENCHMARKS = TABLES_ONLY.replace(
    "from ptb_harness.results.collect import write_tables",
    "import ptb_harness.results.collect as collect\n"
    "from ptb_harness.results.collect import write_tables\n"
    "collect.cell_stage_benchmarks = lambda cell_dir, files: dict.fromkeys(collect.STAGE_BENCHMARK_COLUMNS)",
)


#: `ptb-harness status` with no status index (removed first: a campaign's first status)
STATUS_COLD = """
import os, runpy, sys
from ptb_harness.results.status_index import STATUS_INDEX
index = os.path.join(sys.argv[1], "results", STATUS_INDEX)
os.path.exists(index) and os.unlink(index)
sys.argv = ["ptb-harness", "status", "--workdir", sys.argv[1]]
runpy.run_module("ptb_harness", run_name="__main__")
"""
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
        ("collect (tables + plots)", [*cli, "collect", "--workdir", d], "tables only", [py, "-c", TABLES_ONLY, d]),
        (
            "collect, tables only, stage benchmarks read",
            [py, "-c", TABLES_ONLY, d],
            "benchmarks not read",
            [py, "-c", TABLES_WITHOUT_BENCHMARKS, d],
        ),
    ]
