"""The campaign's plots (PNG), from the cell table and the leaderboard: bars with error
bars, a task heatmap, time used against budget, and a cell's GPU use over time."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a cluster node
import matplotlib.pyplot as plt
import pandas as pd

from ptb_harness.campaign.cells import Cell
from ptb_harness.core.records import atomic_write_text
from ptb_harness.results.leaderboard import AGENT, DAGGER, WEIGHTED, Weights, leaderboard_html


def _save(fig: plt.Figure, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    plt.close(fig)
    tmp.replace(path)


def leaderboard_bars(board: pd.DataFrame, path: Path) -> None:
    """Weighted average (or the only task) per entry, ± std over repeats; unscored shown as such."""
    tasks = [t for t in board["task"].unique() if t != WEIGHTED]
    column = tasks[0] if len(tasks) == 1 else WEIGHTED
    rows = board[board["task"] == column]
    fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(rows) + 2), 3.6))
    for i, r in enumerate(rows.itertuples()):
        if math.isnan(r.mean):
            ax.text(i, 0.02, "no score", rotation=90, ha="center", va="bottom", color="grey")
            continue
        ax.bar(
            i,
            r.mean,
            yerr=None if math.isnan(r.std) else r.std,
            capsize=4,
            color="tab:blue" if r.kind == AGENT else "lightgrey",
            hatch="" if r.kind == AGENT else "//",
            edgecolor="black",
        )
        subs = f"; {r.n_substituted}{DAGGER}" if r.n_substituted else ""
        label = f"{r.mean:.3f}{DAGGER if subs else ''}\n({r.n_scored}/{r.n_cells}{subs})"
        ax.text(i, r.mean, label, ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(rows)), [f"{e}" for e in rows["entry"]], rotation=20, ha="right")
    ax.set_ylim(0, 1.15)
    ax.set_ylabel(f"accuracy ({column})")
    ax.set_title("Leaderboard (error bars: std over repeats; hatched: reference)")
    _save(fig, path)


def task_heatmap(board: pd.DataFrame, path: Path) -> None:
    """Entry x task mean accuracy; cells with no score are blank and labelled."""
    grid = board.pivot_table(index="entry", columns="task", values="mean", aggfunc="first", dropna=False)
    fig, ax = plt.subplots(figsize=(1.3 * len(grid.columns) + 3, 0.5 * len(grid) + 1.5))
    im = ax.imshow(grid.to_numpy(dtype=float), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    for (i, j), v in pd.DataFrame(grid.to_numpy(dtype=float)).stack(future_stack=True).items():
        ax.text(j, i, "no score" if math.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=8, color="w")
    ax.set_xticks(range(len(grid.columns)), grid.columns, rotation=20, ha="right")
    ax.set_yticks(range(len(grid.index)), grid.index)
    fig.colorbar(im, ax=ax, label="accuracy")
    ax.set_title("Mean accuracy per task")
    _save(fig, path)


def time_vs_budget(table: pd.DataFrame, path: Path) -> None:
    """Each solved cell's agent time as a fraction of its budget, per agent."""
    solved = table.dropna(subset=["solve_duration_s"])
    agents = sorted(table["agent"].unique())
    fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(agents) + 2), 3.4))
    for i, agent in enumerate(agents):
        mine = solved[solved["agent"] == agent]
        frac = mine["solve_duration_s"] / mine["budget_s"]
        ax.scatter([i] * len(frac), frac, alpha=0.7)
    ax.axhline(1.0, color="red", linestyle="--", label="budget")
    ax.set_xticks(range(len(agents)), agents, rotation=20, ha="right")
    ax.set_ylabel("agent time / budget")
    ax.set_title("Time used vs budget (one point per solved cell)")
    ax.legend()
    _save(fig, path)


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
    _save(fig, path)
    return True


def write_plots(table: pd.DataFrame, board: pd.DataFrame, weights: Weights, paths: Mapping[str, Path]) -> list[Path]:
    """Every plot, to the paths named in COLLECT_OUTPUTS (`leaderboard_png`, `heatmap_png`,
    `time_png`; one PNG per cell with a monitor CSV under `gpu_plots`); with a path named
    `leaderboard_html`, also the self-contained leaderboard page, which embeds the first two."""
    leaderboard_bars(board, paths["leaderboard_png"])
    task_heatmap(board, paths["heatmap_png"])
    time_vs_budget(table, paths["time_png"])
    written = [paths["leaderboard_png"], paths["heatmap_png"], paths["time_png"]]
    if "leaderboard_html" in paths:
        page = leaderboard_html(board, weights, table, written[:2])
        atomic_write_text(paths["leaderboard_html"], page)
    if "gpu_plots" in paths:
        written += gpu_plots(table, paths["gpu_plots"])
    return written


def gpu_plots(table: pd.DataFrame, gpu_dir: Path) -> list[Path]:
    """One GPU plot per cell with a monitor CSV, named by the cell's slug."""
    gpu_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for r in table.itertuples():
        csv = Path(r.cell_dir) / "gpu_monitor.csv"
        slug = Cell(r.agent, r.task, r.model, str(r.hours), int(r.num_gpus), int(r.run)).slug
        if csv.is_file() and gpu_over_time(csv, gpu_dir / f"{slug}.png", slug):
            written.append(gpu_dir / f"{slug}.png")
    return written
