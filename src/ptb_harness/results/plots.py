"""The campaign's plots (PNG), from the cell table and the leaderboard: bars with error
bars, a task heatmap (best entry first), time used against budget (a distinct colour per agent
for up to 60 agents)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a cluster node
import matplotlib.pyplot as plt
import pandas as pd

from ptb_harness.results.leaderboard import AGENT, DAGGER, WEIGHTED


def save_figure(fig: plt.Figure, path: Path, dpi: int = 110) -> None:
    """Write fig to path as PNG atomically (a reader never sees half a file), and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
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
    save_figure(fig, path)


def task_heatmap(board: pd.DataFrame, path: Path) -> None:
    """Entry x task mean accuracy; cells with no score are blank and labelled."""
    grid = board.pivot_table(index="entry", columns="task", values="mean", aggfunc="first", dropna=False)
    # best first: by the weighted average (else the only task), entries without one last
    key = WEIGHTED if WEIGHTED in grid.columns else grid.columns[0]
    grid = grid.loc[sorted(grid.index, key=lambda e: (math.isnan(grid.at[e, key]), -grid.at[e, key], e))]
    fig, ax = plt.subplots(figsize=(1.3 * len(grid.columns) + 3, 0.5 * len(grid) + 1.5))
    im = ax.imshow(grid.to_numpy(dtype=float), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    for (i, j), v in pd.DataFrame(grid.to_numpy(dtype=float)).stack(future_stack=True).items():
        ax.text(j, i, "no score" if math.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=8, color="w")
    ax.set_xticks(range(len(grid.columns)), grid.columns, rotation=20, ha="right")
    ax.set_yticks(range(len(grid.index)), grid.index)
    fig.colorbar(im, ax=ax, label="accuracy")
    ax.set_title("Mean accuracy per task")
    save_figure(fig, path)


def distinct_colour(i: int) -> tuple[float, float, float, float]:
    """The i-th of 60 distinct colours (tab20, tab20b, tab20c), so 20+ agents do not
    share one."""
    palette = ("tab20", "tab20b", "tab20c")
    return plt.get_cmap(palette[(i // 20) % 3])(i % 20)


def time_vs_budget(table: pd.DataFrame, path: Path) -> None:
    """Each solved cell's agent time as a fraction of its budget, per agent."""
    solved = table.dropna(subset=["solve_duration_s"])
    agents = sorted(table["agent"].unique())
    fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(agents) + 2), 3.4))
    for i, agent in enumerate(agents):
        mine = solved[solved["agent"] == agent]
        frac = mine["solve_duration_s"] / mine["budget_s"]
        ax.scatter([i] * len(frac), frac, alpha=0.7, color=distinct_colour(i))
    ax.axhline(1.0, color="red", linestyle="--", label="budget")
    ax.set_xticks(range(len(agents)), agents, rotation=20, ha="right")
    ax.set_ylabel("agent time / budget")
    ax.set_title("Time used vs budget (one point per solved cell)")
    ax.legend()
    save_figure(fig, path)


def write_plots(table: pd.DataFrame, board: pd.DataFrame, paths: Mapping[str, Path]) -> list[Path]:
    """Every plot, to the paths named in COLLECT_OUTPUTS (`leaderboard_png`, `heatmap_png`,
    `time_png`), in that order. The leaderboard page that embeds the first two, and the GPU
    views (one figure, not one per cell), are the collect pipeline's
    (``results.campaign_outputs``)."""
    leaderboard_bars(board, paths["leaderboard_png"])
    task_heatmap(board, paths["heatmap_png"])
    time_vs_budget(table, paths["time_png"])
    return [paths["leaderboard_png"], paths["heatmap_png"], paths["time_png"]]
