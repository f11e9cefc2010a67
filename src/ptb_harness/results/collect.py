"""Tables of a campaign, from whatever exists on disk: one row per cell, and the
leaderboard (computed and rendered by ``results.leaderboard``).

Cells that are not scored appear with their outcome and evidence, never as a zero, and
every mean says how many scored cells it stands on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ptb_harness.campaign.cells import Campaign
from ptb_harness.core.records import atomic_write_text
from ptb_harness.results.leaderboard import Weights, leaderboard, leaderboard_markdown
from ptb_harness.results.outcome import cell_outcome, local_liveness

CELL_COLUMNS = [
    "agent",
    "task",
    "model",
    "hours",
    "num_gpus",
    "run",
    "outcome",
    "evidence",
    "accuracy",
    "stderr",
    "solve_status",
    "solve_exit_code",
    "solve_duration_s",
    "budget_s",
    "final_model_files",
    "eval_attempts",
    "cell_dir",
]


def cell_table(campaign: Campaign) -> pd.DataFrame:
    rows = []
    alive = local_liveness()
    for cell in campaign.cells():
        cdir = campaign.cell_dir(cell)
        outcome, evidence, rec = cell_outcome(cdir, alive)
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
                "evidence": evidence,
                "accuracy": metrics.get("accuracy"),
                "stderr": metrics.get("stderr"),
                "solve_status": solve.get("status"),
                "solve_exit_code": solve.get("exit_code"),
                "solve_duration_s": solve.get("duration_s"),
                "budget_s": cell.budget_seconds,
                "final_model_files": solve.get("final_model_files"),
                "eval_attempts": len((rec.evaluate or {}).get("attempts", [])) or None,
                "cell_dir": str(cdir),
            }
        )
    table = pd.DataFrame(rows, columns=CELL_COLUMNS)
    for col in ("accuracy", "stderr", "solve_duration_s", "budget_s"):
        table[col] = pd.to_numeric(table[col])
    for col in ("solve_exit_code", "final_model_files", "eval_attempts"):
        table[col] = table[col].astype("Int64")
    return table


def write_tables(campaign: Campaign, paths: Mapping[str, Path]) -> tuple[pd.DataFrame, pd.DataFrame, Weights]:
    """The cell table and the leaderboard (CSV and Markdown), each written atomically to
    the paths named `cells`, `leaderboard_csv`, `leaderboard_md` (see COLLECT_OUTPUTS);
    returns (cell table, leaderboard, weights)."""
    table = cell_table(campaign)
    board, weights = leaderboard(table, campaign.config.get("leaderboard"))
    atomic_write_text(paths["cells"], table.to_csv(index=False))
    atomic_write_text(paths["leaderboard_csv"], board.to_csv(index=False))
    atomic_write_text(paths["leaderboard_md"], leaderboard_markdown(board, weights, table))
    return table, board, weights
