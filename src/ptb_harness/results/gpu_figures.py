"""GPU figures: one campaign-level figure per stage (a row per entry: GPU-hours, the
distributions of utilisation, memory and idle time), and a cell's GPU use over time,
drawn on demand or for a small named set of cells, in a process pool, only when the
cell's monitor changed since its PNG was drawn."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a cluster node
import matplotlib.pyplot as plt
import pandas as pd

from ptb_harness.core.cell_files import GPU_MONITOR
from ptb_harness.results.plots import save_figure

STAGES = ("solve", "evaluate")
STAGE_COLOURS = {"solve": "tab:blue", "evaluate": "tab:orange"}


def campaign_gpu_figure(usage: pd.DataFrame, path: Path) -> None:
    """A row per entry (sorted by total GPU-hours), four panels: GPU-hours by stage
    (stacked), then for the solve stage the per-cell distributions of mean utilisation,
    peak memory and idle fraction (box plots; one dot per cell when an entry has few)."""
    fig_h = 1.6 + 0.28 * max(1, usage["entry"].nunique() if len(usage) else 1)
    fig, axes = plt.subplots(
        1, 4, figsize=(15, fig_h), sharey=True, layout="constrained", gridspec_kw={"width_ratios": [1.2, 1, 1, 1]}
    )
    if usage.empty:
        axes[0].text(0.5, 0.5, "no GPU monitor in any cell", ha="center", va="center", transform=axes[0].transAxes)
        save_figure(fig, path, dpi=100)
        return
    hours = usage.pivot_table(index="entry", columns="stage", values="gpu_hours", aggfunc="sum", fill_value=0.0)
    stages = [s for s in STAGES if s in hours.columns] + [s for s in hours.columns if s not in STAGES]
    hours = hours[stages]
    order = hours.sum(axis=1).sort_values().index.tolist()
    hours = hours.loc[order]
    y = range(len(order))
    left = [0.0] * len(order)
    for stage in hours.columns:
        axes[0].barh(y, hours[stage], left=left, color=STAGE_COLOURS.get(stage, "grey"), label=stage)
        left = [a + b for a, b in zip(left, hours[stage], strict=True)]
    axes[0].set_yticks(list(y), order, fontsize=8)
    axes[0].set_xlabel("GPU-hours (all cells)")
    axes[0].legend(fontsize=7, loc="lower right")
    solve = usage[usage["stage"] == "solve"]
    panels = [
        ("util_mean", "mean utilisation per cell (%)", (0, 100)),
        ("mem_peak_gib", "peak memory per cell (GiB)", None),
        ("idle_fraction", "idle fraction per cell (util <= 5%)", (0, 1)),
    ]
    for ax, (column, label, limits) in zip(axes[1:], panels, strict=True):
        data = [solve.loc[solve["entry"] == e, column].dropna().tolist() for e in order]
        ax.boxplot(
            [d if d else [float("nan")] for d in data],
            positions=list(y),
            orientation="horizontal",
            widths=0.6,
            showfliers=True,
            flierprops={"markersize": 2},
            manage_ticks=False,  # keep the entry names of the shared y axis
        )
        ax.set_xlabel(f"solve: {label}", fontsize=8)
        if limits:
            ax.set_xlim(*limits)
    axes[0].set_ylim(-0.6, len(order) - 0.4)
    fig.suptitle(f"GPU use per entry ({solve['cell_dir'].nunique()} cells with a solve monitor)", fontsize=10)
    save_figure(fig, path, dpi=100)


def gpu_over_time(monitor_csv: Path, path: Path, title: str) -> bool:
    """Memory and utilisation per GPU over time from a cell's gpu_monitor.csv."""
    data = pd.read_csv(monitor_csv)
    if data.empty:
        return False
    data["time"] = pd.to_datetime(data["time"], utc=True)
    t0 = data["time"].min()
    fig, (mem, util) = plt.subplots(2, 1, figsize=(7, 4.5), sharex=True)
    for (uuid, stage), part in data.groupby(["gpu_uuid", "stage"]):
        minutes = (part["time"] - t0).dt.total_seconds() / 60
        label = f"{stage} {str(uuid)[:12]}"
        mem.plot(minutes, part["memory_used_mib"] / 1024, label=label)
        util.plot(minutes, part["utilization_pct"], label=label)
    mem.set_ylabel("memory used (GiB)")
    util.set_ylabel("utilisation (%)")
    util.set_xlabel("minutes since the first sample")
    mem.legend(fontsize=7)
    mem.set_title(title)
    save_figure(fig, path, dpi=100)
    return True


def _draw_one(job: tuple[str, str, str]) -> str | None:
    cell_dir, png, title = job
    return png if gpu_over_time(Path(cell_dir) / GPU_MONITOR, Path(png), title) else None


def _fresh(png: Path, monitor: Path) -> bool:
    try:
        return png.stat().st_mtime_ns >= monitor.stat().st_mtime_ns
    except OSError:
        return False


def draw_cell_plots(cells: Sequence[tuple[str, str]], out_dir: Path, workers: int | None = None) -> list[Path]:
    """Per-cell GPU plots for the named (cell_dir, slug) pairs into out_dir/<slug>.png;
    a plot newer than its monitor is kept as it is. PNGs of cells no longer named are
    removed, so the directory holds exactly the named set."""
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = {f"{slug}.png" for _, slug in cells}
    for old in out_dir.glob("*.png"):
        if old.name not in wanted:
            old.unlink(missing_ok=True)
    jobs = [
        (cell_dir, str(out_dir / f"{slug}.png"), slug)
        for cell_dir, slug in cells
        if not _fresh(out_dir / f"{slug}.png", Path(cell_dir) / GPU_MONITOR)
    ]
    if len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=workers or min(4, os.cpu_count() or 1)) as pool:
            list(pool.map(_draw_one, jobs))
    elif jobs:
        _draw_one(jobs[0])
    return sorted(p for p in out_dir.glob("*.png") if p.name in wanted)
