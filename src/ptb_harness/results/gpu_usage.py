"""GPU use of a whole campaign, from each cell's gpu_monitor.csv: one summary row per cell
and stage, cached by the CSV's size and mtime so that a collect in mid-campaign reads only
the monitors that changed.

A summary says what a researcher asks of 4,000 cells at once: GPU-hours, how busy the
cards were (mean and median utilisation, the fraction of samples at idle), and memory
(peak and mean). The per-cell plot over time is drawn on demand (``plot-cell``), or for
a small named set (the least busy cells, failed cells), never for every cell.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from ptb_harness.campaign.cells import CELL_KEYS
from ptb_harness.core.cell_files import GPU_MONITOR
from ptb_harness.core.records import atomic_write_text

#: utilisation at or below this (percent) counts as idle
IDLE_PCT = 5.0
#: a monitor larger than this is not read (10 h at one sample a second is ~4 MB a GPU)
MAX_MONITOR_BYTES = 256 * 2**20
_CACHE_VERSION = 1


@dataclass(frozen=True)
class StageUse:
    """One stage of one cell, over all its GPUs."""

    stage: str
    samples: int
    gpus: int
    gpu_hours: float
    util_mean: float | None
    util_median: float | None
    idle_fraction: float | None
    mem_peak_gib: float
    mem_mean_gib: float


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _seconds(stamp: str) -> float:
    # iso_utc stamps (2026-11-30T12:00:00.123Z); only differences are used
    return datetime.fromisoformat(stamp).timestamp()


def summarize(path: Path) -> list[StageUse]:
    """The stages of one monitor CSV. GPU-hours per GPU are the span of its samples plus
    one sampling interval (the median gap), so a short stage is not counted as zero."""
    by_stage: dict[str, dict[str, list[tuple[float, float | None, float]]]] = {}
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), newline="") as f:
        reader = csv.reader(f)
        try:
            head = next(reader)
            i_time, i_stage, i_uuid = head.index("time"), head.index("stage"), head.index("gpu_uuid")
            i_util, i_mem = head.index("utilization_pct"), head.index("memory_used_mib")
        except (StopIteration, ValueError):
            return []
        for row in _rows(reader):
            try:
                t = _seconds(row[i_time])
                mem = float(row[i_mem]) / 1024
                util = float(row[i_util]) if row[i_util] else None
            except (IndexError, ValueError):
                continue  # a cut-off last line of a killed job
            by_stage.setdefault(row[i_stage] or "?", {}).setdefault(row[i_uuid] or "?", []).append((t, util, mem))
    out = []
    for stage, gpus in by_stage.items():
        hours, utils, mems = 0.0, [], []
        for samples in gpus.values():
            times = sorted(t for t, _, _ in samples)
            gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
            step = _median(gaps) or 0.0
            hours += (times[-1] - times[0] + step) / 3600
            utils += [u for _, u, _ in samples if u is not None]
            mems += [m for _, _, m in samples]
        out.append(
            StageUse(
                stage=stage,
                samples=sum(len(s) for s in gpus.values()),
                gpus=len(gpus),
                gpu_hours=round(hours, 4),
                util_mean=round(sum(utils) / len(utils), 2) if utils else None,
                util_median=_median(utils),
                idle_fraction=round(sum(u <= IDLE_PCT for u in utils) / len(utils), 4) if utils else None,
                mem_peak_gib=round(max(mems), 3),
                mem_mean_gib=round(sum(mems) / len(mems), 3),
            )
        )
    return out


def _rows(reader: Iterator[list[str]]) -> Iterator[list[str]]:
    """The CSV's rows up to the first that the csv module cannot read (a NUL byte, a
    cut-off quoted field): what came before is kept."""
    with contextlib.suppress(csv.Error):
        yield from reader


class GpuUsageCache:
    """Summaries keyed by cell dir, valid while the CSV's size and mtime are unchanged.
    Stored as one JSON file; a damaged or foreign cache is ignored (recomputed)."""

    def __init__(self, path: Path):
        self.path = path
        self.entries: dict[str, list] = {}
        self.hits = self.misses = 0
        try:
            data = json.loads(path.read_text())
            if data.get("version") == _CACHE_VERSION and isinstance(data.get("cells"), dict):
                self.entries = data["cells"]
        except (OSError, ValueError, AttributeError):
            pass

    def get(self, cell_dir: str) -> list[StageUse] | None:
        """The cell's stages, or None without a monitor CSV."""
        csv_path = Path(cell_dir) / GPU_MONITOR
        try:
            st = csv_path.lstat()
        except OSError:
            st = None
        # the harness writes a regular file of ~100 bytes a sample; a link (to /dev/zero, a
        # host file), a FIFO or a runaway size is not read
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MONITOR_BYTES:
            self.entries.pop(cell_dir, None)
            return None
        key = [st.st_size, st.st_mtime_ns]
        cached = self.entries.get(cell_dir)
        if cached and cached[:2] == key:
            self.hits += 1
            return [StageUse(**s) for s in cached[2]]
        self.misses += 1
        stages = summarize(csv_path)
        self.entries[cell_dir] = [*key, [asdict(s) for s in stages]]
        return stages

    def save(self, keep: Iterable[str]) -> None:
        keep = set(keep)
        cells = {k: v for k, v in self.entries.items() if k in keep}
        atomic_write_text(self.path, json.dumps({"version": _CACHE_VERSION, "cells": cells}))


#: what a row takes from its cell's row of the cell table (with the leaderboard's entry)
FROM_CELL_TABLE = ("entry", *CELL_KEYS, "outcome")
GPU_USAGE_COLUMNS = [
    *FROM_CELL_TABLE,
    "stage",
    "samples",
    "gpus",
    "gpu_hours",
    "util_mean",
    "util_median",
    "idle_fraction",
    "mem_peak_gib",
    "mem_mean_gib",
    "cell_dir",
]


def gpu_usage_rows(cells: Iterable[dict], cache: GpuUsageCache) -> list[dict]:
    """One row per cell and stage; `cells` are the cell table's rows (dicts with at least
    FROM_CELL_TABLE and cell_dir)."""
    rows = []
    for cell in cells:
        for use in cache.get(cell["cell_dir"]) or ():
            rows.append({**{k: cell.get(k) for k in FROM_CELL_TABLE}, **asdict(use), "cell_dir": cell["cell_dir"]})
    return rows


def lowest_utilisation(rows: list[dict], n: int, stage: str = "solve") -> list[dict]:
    """The n cells whose stage kept its GPUs least busy (mean utilisation), least first."""
    scored = [r for r in rows if r["stage"] == stage and r["util_mean"] is not None]
    return sorted(scored, key=lambda r: (r["util_mean"], r["cell_dir"]))[:n]


def fmt(value: float | None, digits: int = 2) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def cache_path(results_dir: Path) -> Path:
    return results_dir / "tables" / ".gpu_usage_cache.json"


def monitor_of(cell_dir: str | os.PathLike) -> Path:
    return Path(cell_dir) / GPU_MONITOR
