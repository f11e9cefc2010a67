"""Tables of a campaign, from whatever exists on disk: one row per cell, and the
leaderboard (computed and rendered by ``results.leaderboard``).

Cells that are not scored appear with their outcome and evidence, never as a zero, and
every mean says how many scored cells it stands on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import CELL_KEYS
from ptb_harness.core.cell_files import (
    BENCHMARKED_STAGES,
    JUDGEMENT,
    JUDGEMENT_OVERRIDE,
    OUTCOME_RECORDS,
    USAGE,
    JudgementOverride,
    SolveRecord,
    stage_benchmark,
)
from ptb_harness.core.layout import cell_dir_rel
from ptb_harness.core.records import atomic_write_text
from ptb_harness.core.text import csv_text, valid_text
from ptb_harness.results.cell_index import SCALAR, IndexSpec, writable_index
from ptb_harness.results.flags import Flag, judgement_flag
from ptb_harness.results.leaderboard import Weights, leaderboard, leaderboard_markdown, with_fallback
from ptb_harness.results.outcome import CellRecords, Liveness, cell_outcome, local_liveness, map_cells
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


#: the cells.csv columns a cell's files decide (the others come from the campaign's settings)
READ_COLUMNS = [c for c in CELL_COLUMNS if c not in (*CELL_KEYS, "budget_s", "cell_dir")]
#: collect's index in the results dir (results.cell_index): a scored cell's READ_COLUMNS
COLLECT_INDEX = ".collect-index.json"
#: the files a scored cell's row is read from: their identity keys its entry
ROW_SOURCES = (
    *OUTCOME_RECORDS,
    JUDGEMENT,
    JUDGEMENT_OVERRIDE,
    USAGE,
    *(stage_benchmark(stage) for stage in BENCHMARKED_STAGES),
)


ROW_SPEC = IndexSpec(
    file_name=COLLECT_INDEX,
    sources=ROW_SOURCES,
    # the modules whose code decides a row: a change to any makes a new index
    deciding=(
        "ptb_harness.results.collect",
        "ptb_harness.results.outcome",
        "ptb_harness.results.flags",
        "ptb_harness.results.token_usage",
        "ptb_harness.results.stage_benchmarks",
        "ptb_harness.core.cell_files",
        "ptb_harness.core.text",
        "ptb_harness.judging.verdict",
    ),
    fields=dict.fromkeys(READ_COLUMNS, SCALAR),
)


def cell_table(campaign: Campaign, use_index: bool = True) -> pd.DataFrame:
    """One row per cell (CELL_COLUMNS). A scored cell whose files are as collect's index
    saw them last is taken from it (``use_index``), and the index is written back."""
    root = str(campaign.results_dir)  # resolved once, not per cell
    judged = campaign.settings.judge.enabled
    counted = campaign.settings.leaderboard.judges
    cells = list(campaign.cells())
    rels = [cell_dir_rel(cell.wildcards) for cell in cells]
    alive = local_liveness()
    index = writable_index(ROW_SPEC, root, {"judged": judged, "counted": list(counted)}) if use_index else None

    def read(rel: str) -> dict[str, object]:
        cdir = f"{root}/{rel}"
        kept = index.lookup(rel, cdir) if index is not None else None
        if kept is not None:
            return kept
        signed = index.sign(cdir) if index is not None else None  # before the records are read
        fields = _read_row(cdir, alive, judged, counted)
        if index is not None and fields["outcome"] == "scored":
            index.keep(rel, signed, fields)
        return fields

    read_rows = map_cells(read, rels)
    if index is not None:
        index.save(rels)
    rows = [
        {
            **{key: getattr(c, key) for key in CELL_KEYS},
            **fields,
            "budget_s": c.budget_seconds,
            "cell_dir": f"{root}/{rel}",
        }
        for c, rel, fields in zip(cells, rels, read_rows, strict=True)
    ]
    table = pd.DataFrame(rows, columns=CELL_COLUMNS)
    for col in ("accuracy", "stderr", "solve_duration_s", "budget_s"):
        table[col] = pd.to_numeric(table[col])
    for col in ("solve_exit_code", "final_model_files", "eval_attempts", "solve_attempts"):
        table[col] = table[col].astype("Int64")
    return typed_stage_benchmarks(typed_token_usage(table))


def _read_row(cdir: str, alive: Liveness, judged: bool, counted: tuple[str, ...]) -> dict[str, object]:
    """A cell's READ_COLUMNS, from its files."""
    outcome, evidence, rec = cell_outcome(cdir, alive)
    # a scored cell of a judged campaign without a verdict is flagged (fail closed)
    flag = _verdict(rec, judged and outcome == "scored", counted)
    solve = rec.solve or SolveRecord()
    # a score counts only when the records vouch for it (outcome scored), never a forged one
    metrics = (rec.metrics or {}) if outcome == "scored" else {}
    return {
        "outcome": outcome,
        "evidence": valid_text(evidence),
        "accuracy": metrics.get("accuracy"),
        "stderr": metrics.get("stderr"),
        "solve_status": _text(solve.status),
        "solve_exit_code": solve.exit_code,
        "solve_duration_s": solve.duration_s,
        "final_model_files": solve.final_model_files,
        "eval_attempts": len(rec.evaluate.attempts) if rec.evaluate is not None else None,
        **cell_token_usage(cdir if rec.files and USAGE in rec.files else None),
        **_verdict_columns(flag),
        # tries in which the agent ran: more than 1 means it was solved again
        "solve_attempts": _solve_attempts(rec.solve),
        # each stage's job: wall, CPU, max RSS (Snakemake's benchmark; unknown without one)
        **cell_stage_benchmarks(cdir, rec.files),
    }


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
