"""Status and collect on a synthetic campaign, and their floors: listing the same tree
with os.scandir (status), reading the same JSON files in a plain loop (collect).
Run through `python bench/run_all.py --only status`."""

from __future__ import annotations

import sys
from pathlib import Path

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


def commands(d: str | Path) -> list[tuple[str, list[str], str, list[str]]]:
    """(label, command, floor label, floor command) for a campaign dir."""
    py, d = sys.executable, str(d)
    cli = [py, "-m", "ptb_harness"]
    return [
        ("status", [*cli, "status", "--workdir", d], "os.scandir listing", [py, "-c", FLOOR_LIST, d]),
        (
            "collect (tables + plots)",
            [*cli, "collect", "--workdir", d],
            "plain JSON read loop",
            [py, "-c", FLOOR_READ, d],
        ),
    ]
