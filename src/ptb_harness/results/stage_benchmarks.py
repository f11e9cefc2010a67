"""Where a campaign's hours go: each cell's Snakemake benchmarks of its solve, evaluate and
judge jobs (the rules' ``benchmark:``, ``<stage>.benchmark.tsv`` in the cell dir), as
cells.csv columns and summed per stage and outcome in ``tables/stage_hours.csv``.

A quantity a benchmark does not state (no benchmark: the stage did not run, failed, or
ran before benchmarks were written; Snakemake's ``NA`` for a job shorter than its first
sample) is unknown, never 0: sums are over the cells that state it, and say how many.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Sequence
from typing import Any

import pandas as pd

from ptb_harness.core.cell_files import BENCHMARKED_STAGES, stage_benchmark
from ptb_harness.core.records import read_record_bytes

#: a benchmark is a header and one line per repeat (one here): far below this
MAX_BENCHMARK_BYTES = 64 * 1024
#: Snakemake's columns read, as (its name, ours): wall seconds, CPU seconds, max RSS in MB
_READ = (("s", "wall_s"), ("cpu_time", "cpu_s"), ("max_rss", "max_rss_mb"))
#: the cells.csv columns, per benchmarked stage: solve_wall_s, solve_cpu_s, solve_max_rss_mb, ...
STAGE_BENCHMARK_COLUMNS = tuple(f"{stage}_{ours}" for stage in BENCHMARKED_STAGES for _, ours in _READ)
#: tables/stage_hours.csv: per stage, one row per outcome of the campaign's cells and one for all
STAGE_HOURS_COLUMNS = ["stage", "outcome", "cells", "measured", "wall_h", "cpu_h", "max_rss_mb", "wall_share"]
ALL = "all"


def _number(text: str) -> float | None:
    """A finite, non-negative number of a benchmark's field, else None (NA, '-', junk)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def read_benchmark(path: str | os.PathLike[str]) -> dict[str, float | None] | None:
    """wall_s, cpu_s and max_rss_mb of a benchmark's first run; None when there is no
    readable benchmark (missing, a link, too big, not Snakemake's header)."""
    data, _ = read_record_bytes(path, MAX_BENCHMARK_BYTES)
    if data is None:
        return None
    lines = data.decode("utf-8", "replace").splitlines()
    if len(lines) < 2:
        return None
    head, first = lines[0].split("\t"), lines[1].split("\t")
    if head[:1] != ["s"]:
        return None
    fields = dict(zip(head, first, strict=False))
    return {ours: _number(fields.get(theirs, "")) for theirs, ours in _READ}


def cell_stage_benchmarks(cell_dir: str, files: Collection[str] | None) -> dict[str, float | None]:
    """The STAGE_BENCHMARK_COLUMNS of one cell; files: the names in its dir (a benchmark
    not listed is not opened), None when the dir was not listed."""
    out: dict[str, float | None] = dict.fromkeys(STAGE_BENCHMARK_COLUMNS)
    for stage in BENCHMARKED_STAGES:
        name = stage_benchmark(stage)
        if files is None or name not in files:
            continue
        for key, value in (read_benchmark(os.path.join(cell_dir, name)) or {}).items():
            out[f"{stage}_{key}"] = value
    return out


def _hours_row(stage: str, outcome: str, cells: pd.DataFrame) -> dict[str, Any]:
    wall, cpu, rss = (cells[f"{stage}_{ours}"].dropna() for _, ours in _READ)
    return {
        "stage": stage,
        "outcome": outcome,
        "cells": len(cells),
        "measured": len(wall),
        "wall_h": wall.sum() / 3600 if len(wall) else None,
        "cpu_h": cpu.sum() / 3600 if len(cpu) else None,
        "max_rss_mb": rss.max() if len(rss) else None,
    }


def stage_hours(
    table: pd.DataFrame, outcomes: Sequence[str], stages: Sequence[str] = BENCHMARKED_STAGES
) -> pd.DataFrame:
    """Per stage: the wall and CPU hours and the largest RSS of its jobs, for the cells of
    each outcome (in the order given; unscored cells in rows of their own) and for all;
    `wall_share`: the row's part of the wall hours of all stages."""
    present = [o for o in outcomes if o in set(table["outcome"])]
    present += sorted(set(table["outcome"]) - set(present))
    rows = []
    for stage in stages:
        rows += [_hours_row(stage, o, table[table["outcome"] == o]) for o in present]
        rows.append(_hours_row(stage, ALL, table))
    hours = pd.DataFrame(rows, columns=STAGE_HOURS_COLUMNS)
    for col in ("wall_h", "cpu_h", "max_rss_mb"):
        hours[col] = pd.to_numeric(hours[col])
    total = hours.loc[hours["outcome"] == ALL, "wall_h"].sum()
    hours["wall_share"] = (hours["wall_h"] / total).round(4) if total > 0 else float("nan")
    return hours.round({"wall_h": 4, "cpu_h": 4})


def hours_line(hours: pd.DataFrame) -> str:
    """One line for collect's output: each stage's wall and CPU hours and how many cells
    they stand on."""
    parts = []
    for r in hours[hours["outcome"] == ALL].itertuples():
        if r.measured == 0:
            parts.append(f"{r.stage} not measured")
            continue
        cpu = f"{r.cpu_h:.2f}" if not math.isnan(r.cpu_h) else "?"
        parts.append(f"{r.stage} {r.wall_h:.2f} h wall, {cpu} h CPU ({r.measured} of {r.cells} cells)")
    return "hours per stage: " + "; ".join(parts)


def typed_stage_benchmarks(table: pd.DataFrame) -> pd.DataFrame:
    """The benchmark columns as floats (NaN: unknown)."""
    for col in STAGE_BENCHMARK_COLUMNS:
        table[col] = pd.to_numeric(table[col])
    return table
