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
                        vals.append(json.loads(f.read()))
                except FileNotFoundError:
                    pass
        else:
            walk(e.path, depth + 1)
walk(sys.argv[1] + '/results/cells', 0)
print(len(vals))
"""
#: status reads a scored cell's metrics.json and nothing else
FLOOR_STATUS = "NAMES = ('metrics.json',)\n" + _WALK
#: collect's tables read every cell's records
FLOOR_COLLECT = "NAMES = ('solve.json', 'evaluate.json', 'metrics.json', 'solve.state.json')\n" + _WALK
#: collect's tables alone (the CLI writes the plots too)
TABLES_ONLY = """
import sys
from ptb_harness.core.layout import collect_outputs
from ptb_harness.campaign.config import load_config_files
from ptb_harness.results.collect import write_tables
campaign = load_config_files(sys.argv[1])
write_tables(campaign, collect_outputs(campaign.results_dir))
"""


def commands(d: str | Path) -> list[tuple[str, list[str], str, list[str]]]:
    """(label, command, floor label, floor command) for a campaign dir."""
    py, d = sys.executable, str(d)
    cli = [py, "-m", "ptb_harness"]
    return [
        ("status", [*cli, "status", "--workdir", d], "metrics.json read loop", [py, "-c", FLOOR_STATUS, d]),
        ("collect, tables only", [py, "-c", TABLES_ONLY, d], "records read loop", [py, "-c", FLOOR_COLLECT, d]),
        ("collect (tables + plots)", [*cli, "collect", "--workdir", d], "tables only", [py, "-c", TABLES_ONLY, d]),
    ]
