"""Tables of a campaign, from whatever exists on disk: one row per cell, and a leaderboard.

Cells that are not scored appear with their outcome and reason, never as a zero, and
every mean says how many scored cells it stands on.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ptb_harness.campaign import Campaign
from ptb_harness.outcome import classify, read_cell
from ptb_harness.records import atomic_write_text

CELL_COLUMNS = [
    "agent",
    "task",
    "model",
    "hours",
    "num_gpus",
    "run",
    "outcome",
    "reason",
    "accuracy",
    "stderr",
    "solve_status",
    "solve_exit_code",
    "solve_duration_s",
    "final_model_files",
    "eval_attempts",
    "cell_dir",
]


def cell_table(campaign: Campaign) -> pd.DataFrame:
    rows = []
    for cell in campaign.cells():
        cdir = campaign.cell_dir(cell)
        rec = read_cell(cdir)
        outcome, reason = classify(rec)
        solve = rec.solve or {}
        metrics = rec.metrics or {}
        rows.append(
            {
                "agent": cell.agent,
                "task": cell.task,
                "model": cell.model,
                "hours": cell.hours,
                "num_gpus": cell.num_gpus,
                "run": cell.run,
                "outcome": outcome,
                "reason": reason,
                "accuracy": metrics.get("accuracy"),
                "stderr": metrics.get("stderr"),
                "solve_status": solve.get("status"),
                "solve_exit_code": solve.get("exit_code"),
                "solve_duration_s": solve.get("duration_s"),
                "final_model_files": solve.get("final_model_files"),
                "eval_attempts": len((rec.evaluate or {}).get("attempts", [])) or None,
                "cell_dir": str(cdir),
            }
        )
    table = pd.DataFrame(rows, columns=CELL_COLUMNS)
    for col in ("accuracy", "stderr", "solve_duration_s"):
        table[col] = pd.to_numeric(table[col])
    for col in ("solve_exit_code", "final_model_files", "eval_attempts"):
        table[col] = table[col].astype("Int64")
    return table


def leaderboard(table: pd.DataFrame) -> pd.DataFrame:
    """Per agent and task: mean accuracy over scored cells (models and repeats), with counts."""
    grouped = table.groupby(["agent", "task"], sort=True)
    board = grouped.agg(
        mean_accuracy=("accuracy", "mean"),
        std_accuracy=("accuracy", "std"),
        n_scored=("accuracy", "count"),
        n_cells=("outcome", "size"),
    ).reset_index()
    return board


def leaderboard_markdown(board: pd.DataFrame, table: pd.DataFrame) -> str:
    """Agents as rows, tasks as columns; a cell reads 'mean (scored/total)', '—' with none scored."""
    tasks = sorted(board["task"].unique())
    lines = ["| agent | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
    for agent, rows in board.groupby("agent", sort=True):
        cells = []
        by_task = rows.set_index("task")
        for t in tasks:
            if t not in by_task.index:
                cells.append("")
                continue
            r = by_task.loc[t]
            mean = "—" if r["n_scored"] == 0 else f"{r['mean_accuracy']:.3f}"
            cells.append(f"{mean} ({r['n_scored']}/{r['n_cells']})")
        lines.append(f"| {agent} | " + " | ".join(cells) + " |")
    counts = table["outcome"].value_counts()
    summary = ", ".join(f"{n} {k}" for k, n in counts.items())
    out = ["# Leaderboard", "", "Mean accuracy over scored cells (scored/total cells).", ""]
    out += lines + ["", f"Cells: {len(table)} ({summary}).", ""]
    unscored = table[table["outcome"] != "scored"]
    if len(unscored):
        out += ["## Cells without a score", "", "| agent | task | model | hours | run | outcome | reason |"]
        out += ["|---|---|---|---|---|---|---|"]
        for r in unscored.itertuples():
            out.append(f"| {r.agent} | {r.task} | {r.model} | {r.hours} | {r.run} | {r.outcome} | {r.reason} |")
        out.append("")
    return "\n".join(out)


def write_tables(campaign: Campaign, cells_csv: Path, leaderboard_csv: Path, leaderboard_md: Path) -> pd.DataFrame:
    table = cell_table(campaign)
    board = leaderboard(table)
    atomic_write_text(cells_csv, table.to_csv(index=False))
    atomic_write_text(leaderboard_csv, board.to_csv(index=False))
    atomic_write_text(leaderboard_md, leaderboard_markdown(board, table))
    return table
