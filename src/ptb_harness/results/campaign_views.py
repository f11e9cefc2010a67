"""The campaign-scale views collect writes beside the tables: GPU use per entry (a table
and one figure), per-cell GPU plots for a small named set of cells, and the viewer.

Sizes stay fixed whatever the campaign's size: the report shows one GPU figure and one
GPU table, never a plot per cell. Everything here is incremental (see ``gpu_usage`` and
``viewer``), so a collect in mid-campaign costs seconds at 4,000 cells.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ptb_harness.campaign.cells import Cell
from ptb_harness.core.layout import CELL_GPU_PLOTS
from ptb_harness.core.records import atomic_write_text
from ptb_harness.core.text import csv_text
from ptb_harness.results.gpu_figures import campaign_gpu_figure, draw_cell_plots
from ptb_harness.results.gpu_usage import (
    GPU_USAGE_COLUMNS,
    GpuUsageCache,
    cache_path,
    gpu_usage_rows,
    lowest_utilisation,
)
from ptb_harness.results.viewer import ViewerCell, ViewerStats, write_viewer

#: per-cell GPU plots are drawn for the N least busy solves and up to M failed cells
LOWEST_N, FAILED_MAX = 10, 40


@dataclass(frozen=True)
class ViewsSummary:
    gpu_rows: int
    monitors_read: int
    cell_plots: int
    viewer: ViewerStats

    def summary(self) -> str:
        v = self.viewer
        return (
            f"GPU: {self.gpu_rows} stage rows ({self.monitors_read} monitors read), {self.cell_plots} cell plots;"
            f" viewer: {v.cells} cells, {v.pages_written} pages and {v.transcripts_written} transcripts written"
        )


def _slug(r: dict) -> str:
    return Cell(r["agent"], r["task"], r["model"], str(r["hours"]), int(r["num_gpus"]), int(r["run"])).slug


def _entries(table: pd.DataFrame) -> pd.Series:
    """An entry is an agent on one base model (with its budget and GPUs when the campaign
    has several), the unit whose GPU use a researcher compares."""
    base = table["agent"].astype(str) + " / " + table["model"].astype(str)
    if len(table[["hours", "num_gpus"]].drop_duplicates()) <= 1:
        return base
    return base + " (" + table["hours"].astype(str) + "h, " + table["num_gpus"].astype(str) + " GPU)"


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def named_cells(table: pd.DataFrame, rows: list[dict]) -> list[tuple[str, str]]:
    """(cell_dir, slug) of the cells that get a GPU plot over time: the least busy solves
    and failed cells that have a monitor."""
    has_monitor = {r["cell_dir"] for r in rows}
    chosen: dict[str, str] = {}
    for r in lowest_utilisation(rows, LOWEST_N):
        chosen[r["cell_dir"]] = _slug(r)
    failed = table[table["outcome"].isin(["agent_failed", "infra_failed"]) & table["cell_dir"].isin(has_monitor)]
    for r in failed.head(FAILED_MAX).to_dict("records"):
        chosen.setdefault(r["cell_dir"], _slug(r))
    return sorted(chosen.items())


def write_views(table: pd.DataFrame, paths: Mapping[str, Path], results_dir: Path, title: str) -> ViewsSummary:
    """GPU usage table and figure, the named cells' GPU plots, and the viewer, to the
    paths named in COLLECT_OUTPUTS (`gpu_usage`, `gpu_usage_png`, `viewer`)."""
    cell_plots_dir = results_dir / CELL_GPU_PLOTS
    cells = table.assign(entry=_entries(table)).to_dict("records")
    cache = GpuUsageCache(cache_path(results_dir))
    rows = gpu_usage_rows(cells, cache)
    cache.save(r["cell_dir"] for r in cells)
    usage = pd.DataFrame(rows, columns=GPU_USAGE_COLUMNS)
    text = csv_text(usage)
    unchanged = paths["gpu_usage_png"].is_file() and _read(paths["gpu_usage"]) == text
    if not unchanged:  # the figure is the costly part: drawn again only when its data changed
        atomic_write_text(paths["gpu_usage"], text)
        campaign_gpu_figure(usage, paths["gpu_usage_png"])
    plots = draw_cell_plots(named_cells(table, rows), cell_plots_dir)
    by_cell: dict[str, list[dict]] = {}
    for r in rows:
        by_cell.setdefault(r["cell_dir"], []).append(r)
    viewer_cells = [
        ViewerCell(
            slug=_slug(c),
            agent=c["agent"],
            task=c["task"],
            model=c["model"],
            hours=str(c["hours"]),
            num_gpus=int(c["num_gpus"]),
            run=int(c["run"]),
            outcome=c["outcome"],
            evidence=str(c.get("evidence") or ""),
            cell_dir=Path(c["cell_dir"]),
        )
        for c in cells
    ]
    # cells.csv's `flagged`: a judge flag (or no verdict where the judge is on); NaN = no column value
    flagged = {_slug(c) for c in cells if isinstance(c.get("flagged"), bool | np.bool_) and c["flagged"]}
    stats = write_viewer(paths["viewer"].parent, title, viewer_cells, by_cell, cell_plots_dir, flagged)
    return ViewsSummary(gpu_rows=len(rows), monitors_read=cache.misses, cell_plots=len(plots), viewer=stats)
