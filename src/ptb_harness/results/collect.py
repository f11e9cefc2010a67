"""Tables of a campaign, from whatever exists on disk: one row per cell, and the
leaderboard (computed and rendered by ``results.leaderboard``).

Cells that are not scored appear with their outcome and evidence, never as a zero, and
every mean says how many scored cells it stands on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import CELL_KEYS
from ptb_harness.core.cell_files import JUDGEMENT, JUDGEMENT_OVERRIDE, USAGE, JudgementOverride, SolveRecord
from ptb_harness.core.layout import cell_dir_rel
from ptb_harness.core.records import atomic_write_text
from ptb_harness.core.text import csv_text, valid_text
from ptb_harness.results.flags import Flag, judgement_flag
from ptb_harness.results.leaderboard import Weights, leaderboard, leaderboard_markdown, with_fallback
from ptb_harness.results.outcome import CellRecords, cell_outcomes, local_liveness
from ptb_harness.results.stage_benchmarks import (
    STAGE_BENCHMARK_COLUMNS,
    cell_stage_benchmarks,
    typed_stage_benchmarks,
)
from ptb_harness.results.token_usage import (
    TOKEN_USAGE_COLUMNS,
    USAGE_DISAGREEMENT,
    USAGE_SOURCE,
    cell_token_usage,
    typed_token_usage,
)

#: a cell's verdict in the table: its score flagged (and why), a PTB lookup that holds its
#: entry, required verdicts it lacks, an override applied (see results.flags)
VERDICT_COLUMNS = [
    "flagged",
    "flag",
    "flag_justification",
    "ptb_lookup",
    "ptb_lookup_justification",
    "verdict_missing",
    "override",
]


CELL_COLUMNS = [
    *CELL_KEYS,
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
    *TOKEN_USAGE_COLUMNS,
    USAGE_SOURCE,
    USAGE_DISAGREEMENT,
    *VERDICT_COLUMNS,
    "solve_attempts",
    *STAGE_BENCHMARK_COLUMNS,
    "cell_dir",
]


def cell_table(campaign: Campaign) -> pd.DataFrame:
    rows = []
    root = str(campaign.results_dir)  # resolved once, not per cell
    judged = campaign.settings.judge.enabled
    counted = campaign.settings.leaderboard.judges
    cells = list(campaign.cells())
    dirs = [os.path.join(root, cell_dir_rel(cell.wildcards)) for cell in cells]
    for cell, cdir, (outcome, evidence, rec) in zip(cells, dirs, cell_outcomes(dirs, local_liveness()), strict=True):
        # a scored cell of a judged campaign without a verdict is flagged (fail closed)
        flag = _verdict(rec, judged and outcome == "scored", counted)
        solve = rec.solve or SolveRecord()
        # a score counts only when the records vouch for it (outcome scored), never a forged one
        metrics = (rec.metrics or {}) if outcome == "scored" else {}
        rows.append(
            {
                "agent": cell.agent,
                "task": cell.task,
                "model": cell.model,
                "hours": cell.hours,
                "num_gpus": cell.num_gpus,
                "run": cell.run,
                "outcome": outcome,
                "evidence": valid_text(evidence),
                "accuracy": metrics.get("accuracy"),
                "stderr": metrics.get("stderr"),
                "solve_status": _text(solve.status),
                "solve_exit_code": solve.exit_code,
                "solve_duration_s": solve.duration_s,
                "budget_s": cell.budget_seconds,
                "final_model_files": solve.final_model_files,
                "eval_attempts": len(rec.evaluate.attempts) if rec.evaluate is not None else None,
                **cell_token_usage(cdir if rec.files and USAGE in rec.files else None),
                **_verdict_columns(flag),
                # tries in which the agent ran: more than 1 means it was solved again
                "solve_attempts": _solve_attempts(rec.solve),
                # each stage's job: wall, CPU, max RSS (Snakemake's benchmark; unknown without one)
                **cell_stage_benchmarks(cdir, rec.files),
                "cell_dir": cdir,
            }
        )
    table = pd.DataFrame(rows, columns=CELL_COLUMNS)
    for col in ("accuracy", "stderr", "solve_duration_s", "budget_s"):
        table[col] = pd.to_numeric(table[col])
    for col in ("solve_exit_code", "final_model_files", "eval_attempts", "solve_attempts"):
        table[col] = table[col].astype("Int64")
    return typed_stage_benchmarks(typed_token_usage(table))


def _verdict(rec: CellRecords, judged: bool, counted: tuple[str, ...]) -> Flag | None:
    listed = rec.files if rec.files is not None else frozenset()
    override = JudgementOverride.from_dict(rec.judgement_override) if rec.judgement_override is not None else None
    return judgement_flag(
        rec.judgement,
        judged,
        counted=counted,
        judgement_present=JUDGEMENT in listed or rec.judgement is not None,
        override=override,
        override_present=JUDGEMENT_OVERRIDE in listed,
    )


def _verdict_columns(flag: Flag | None) -> dict[str, object]:
    return {
        "flagged": flag is not None and flag.flagged,
        "flag": valid_text(flag.reason) if flag else "",
        "flag_justification": valid_text(flag.justification) if flag else "",
        "ptb_lookup": flag is not None and flag.ptb_lookup,
        "ptb_lookup_justification": valid_text(flag.ptb_lookup_justification) if flag else "",
        "verdict_missing": ", ".join(flag.missing) if flag else "",
        "override": valid_text(flag.override) if flag else "",
    }


def _text(value: object) -> object:
    """A record's text value as a table can hold it (see core.text.valid_text)."""
    return valid_text(value) if isinstance(value, str) else value


def _solve_attempts(solve: SolveRecord | None) -> int | None:
    """Tries in which the agent ran: more than 1 means the cell was solved again."""
    if solve is None:
        return None
    earlier = solve.earlier_attempts
    return 1 + (len(earlier) if isinstance(earlier, list) else 0)


def write_tables(campaign: Campaign, paths: Mapping[str, Path]) -> tuple[pd.DataFrame, pd.DataFrame, Weights]:
    """The cell table (with the leaderboard's `score` and `substituted` columns) and the
    leaderboard (CSV and Markdown), each written atomically to the paths named `cells`,
    `leaderboard_csv`, `leaderboard_md` (see COLLECT_OUTPUTS); returns (cell table,
    leaderboard, weights)."""
    rules = campaign.settings.leaderboard
    table = with_fallback(cell_table(campaign), rules)
    board, weights = leaderboard(table, rules)
    # text fields escaped (csv_text): an agent's newline or formula stays in its field
    atomic_write_text(paths["cells"], csv_text(table))
    atomic_write_text(paths["leaderboard_csv"], csv_text(board))
    atomic_write_text(paths["leaderboard_md"], leaderboard_markdown(board, weights, table))
    return table, board, weights
