"""The leaderboard: its statistics from the cell table, and its Markdown and HTML renderings.

A row per entry (an agent, or an agent at one budget and GPU count when the campaign has
several) and per task:
- `mean`: the mean over models of each model's mean over its scored repeats;
- `std`: the sample standard deviation over repeats of the per-repeat mean over models
  (repeats in which every model is scored; empty with fewer than two);
- `n_scored`/`n_cells`: the cells behind it. A task some model has no score for is
  `complete = False`, and an entry's weighted average needs every task complete.
Reference rows: the base models (the `leaderboard.base_agent`'s cells, normally `noop`)
and, when configured, the instruct models' published scores.

The rules (``campaign.rules.LeaderboardSettings``, from the `leaderboard.rules` preset and
the campaign's changes) decide the rest. `missing: base_model` is PostTrainBench's
fallback: a cell whose agent failed, or whose score a counted verdict flagged, counts as
the base model's score for that task and model (`score`, marked `substituted`;
`n_substituted` counts them, and every rendering marks them `†`); with `empty` a flagged
score is left out. infra_failed and pending cells never count as anything. The weighted
average is over the rules' tasks that the campaign has (renormalised, and said so when a
preset's are missing). An entry with a counted PTB-lookup flag is held unranked (`‡`);
with `missing_verdict: drop_entry`, one with a scored cell lacking a required verdict is
left out (``entry_holds``); both are listed under the table, as are verdicts set by hand.
Agents are ranked by weighted average (descending, ties by name; entries without one, and
held ones, last); the reference rows follow in a fixed order.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ptb_harness.campaign.rules import PRESETS, describe_rules
from ptb_harness.campaign.settings import LeaderboardSettings
from ptb_harness.core.cell_files import JUDGEMENT_OVERRIDE
from ptb_harness.core.text import markdown_cell, markdown_table, terminal_line
from ptb_harness.results.token_usage import (
    TOKEN_USAGE_COLUMNS,
    gateway_cost_by_entry,
    gateway_cost_text,
    token_usage_markdown,
    token_usage_rows,
)

WEIGHTED = "weighted average"
#: why an entry is not ranked (the board's `held`)
PTB_HELD, NO_VERDICT = "ptb_lookup", "no_verdict"
BASE, INSTRUCT, AGENT = "base model", "instruct model", "agent"
LEGEND = (
    "Ranked by weighted average. Accuracy: mean over models of the mean over repeats; ± sample std over "
    "repeats; (scored/total cells); * = some model has no score for this task; — = nothing scored."
)
#: the leaderboard's last column when a cell of the campaign had an LLM gateway
COST = "LLM cost / cell"
COST_NOTE = (
    f"{COST}: the mean over the entry's cells of what its LLM gateway metered, priced (solve.llm_prices, "
    "then genai-prices); unknown: no cell's cost is known (no gateway, or a model without a price), never 0; "
    "(k of n cells): the cells whose cost is known."
)
DAGGER = "†"
FOOTNOTE = (
    f"{DAGGER} = includes cells whose agent failed or that a judge flagged, counted as the base model's score "
    f"for that task and model (leaderboard.missing: base_model); `; N{DAGGER}` says how many."
)
DOUBLE_DAGGER = "‡"
PTB_FOOTNOTE = (
    f"{DOUBLE_DAGGER} = not ranked: a judge found the agent looking up PostTrainBench itself (its repository, "
    "website or leaderboard) in a cell listed below; PostTrainBench stops its aggregation for a human to review. "
    f"A {JUDGEMENT_OVERRIDE} in the cell, with who and why, decides."
)
NO_VERDICT_FOOTNOTE = (
    "Entries with a scored cell that has no required verdict are left out (leaderboard.missing_verdict: "
    "drop_entry, PostTrainBench v1.2's rule); they are listed below."
)
OVERRIDE_FOOTNOTE = (
    f"Some cells' verdicts were set by hand ({JUDGEMENT_OVERRIDE}, which wins over the judges): "
    "listed below with who and why."
)
_STYLE = (
    "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
    "td,th{border:1px solid #bbb;padding:4px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
    "tr.ref td{font-style:italic;color:#555}"
)
#: The cell-table columns listed for every cell without a score.
UNSCORED_COLUMNS = ["agent", "task", "model", "hours", "num_gpus", "run", "outcome", "evidence"]
_UNSCORED_HEAD = ["agent", "task", "model", "hours", "GPUs", "run", "outcome", "evidence"]
FLAGGED_COLUMNS = ["agent", "task", "model", "hours", "num_gpus", "run", "flag", "counted", "flag_justification"]
_FLAGGED_HEAD = ["agent", "task", "model", "hours", "GPUs", "run", "flag", "counted as", "justification"]


def flagged_cells(table: pd.DataFrame) -> pd.DataFrame:
    """The cells a judge flagged (or could not judge), with how the leaderboard counts them."""
    if "flagged" not in table:
        return table.iloc[0:0].assign(counted="")
    flagged = table[table["flagged"].fillna(False).astype(bool)]
    sub = flagged["substituted"] if "substituted" in flagged else pd.Series(False, index=flagged.index)
    return flagged.assign(counted=["base model's score" if s else "left out" for s in sub.fillna(False)])


def _entry_names(table: pd.DataFrame) -> pd.Series:
    """An agent's name, with its budget and GPUs when the campaign has several settings."""
    settings = table[["hours", "num_gpus"]].drop_duplicates()
    if len(settings) <= 1:
        return table["agent"]
    return table["agent"] + " (" + table["hours"].astype(str) + "h, " + table["num_gpus"].astype(str) + " GPU)"


@dataclass(frozen=True)
class Weights:
    """Task weights (sum 1), how they were made, and why none could be made (or ''), with
    the lines the tables show about them (the rules, the average's tasks)."""

    by_task: dict[str, float]
    rule: str
    problem: str = ""
    notes: tuple[str, ...] = ()


def task_weights(rules: LeaderboardSettings, tasks: list[str], base_means: Mapping[str, float]) -> Weights:
    """The weights of the average's tasks (``rules.in_average``) by `rules.weighting`. For
    `inverse_gap` (PostTrainBench v1.0): w_t proportional to 1 / (instruct_t - base_t),
    instruct_t the mean over models of the configured instruct scores, base_t the base
    models' mean score; `explicit` (v1.2's factors): the weights given. Normalised to sum 1
    over the average's tasks."""
    averaged = rules.in_average(tasks)
    rule, notes = rules.weighting, (describe_rules(rules), *_average_notes(rules, tasks, averaged))
    if not averaged:
        why = (
            f"no task of this campaign is in {rules.rules}'s average ({', '.join(rules.average_tasks or ())}): "
            "set leaderboard.rules: custom, or leaderboard.average_tasks"
        )
        return Weights({}, rule, why, notes)
    if rule == "equal":
        return Weights({t: 1 / len(averaged) for t in averaged}, rule, notes=notes)
    if rule == "explicit":
        raw = {t: float(rules.weights[t]) for t in averaged}
    else:
        raw = {}
        for t in averaged:
            scores = rules.instruct_scores[t]
            instruct = sum(scores.values()) / len(scores)
            base = base_means.get(t)
            if base is None or math.isnan(base):
                return Weights({}, rule, f"task {t}: the base models have no complete score yet", notes)
            if instruct <= base:
                why = f"task {t}: instruct {instruct:.4f} <= base {base:.4f}, no gap to weigh by"
                return Weights({}, rule, why, notes)
            raw[t] = 1 / (instruct - base)
    total = sum(raw.values())
    return Weights({t: w / total for t, w in raw.items()}, rule, notes=notes)


def _average_notes(rules: LeaderboardSettings, tasks: list[str], averaged: list[str]) -> list[str]:
    """What the tables say about the average's tasks: a preset's average over part of its
    tasks (renormalised: not the published score), tasks outside it."""
    notes = []
    preset_tasks = PRESETS[rules.rules].average_tasks
    if preset_tasks is not None and "average_tasks" not in rules.changed and averaged:
        absent = [t for t in preset_tasks if t not in averaged]
        if absent:
            notes.append(
                f"The weighted average is over {len(averaged)} of {rules.rules}'s {len(preset_tasks)} tasks "
                f"({', '.join(averaged)}; this campaign lacks {', '.join(absent)}): the weights are renormalised "
                "over them, so it is not comparable with the published scores."
            )
    outside = [t for t in tasks if t not in averaged]
    if outside:
        notes.append(f"Not in the weighted average (shown only): {', '.join(outside)}.")
    return notes


def counts_as_base_model(outcome: str, flagged: bool = False) -> bool:
    """Under `missing: base_model`, whether a cell counts as the base model's score: its
    agent failed, or (once judges flag cells) a judge flagged its score. infra_failed and
    pending cells never do: infrastructure is fixed and rerun, not papered over."""
    return outcome == "agent_failed" or (flagged and outcome == "scored")


def with_fallback(table: pd.DataFrame, rules: LeaderboardSettings) -> pd.DataFrame:
    """The cell table with `score` (the value the leaderboard counts) and `substituted`
    (True where that is the base model's score, under `leaderboard.missing: base_model`).
    The base score of a task and model is the mean of the base agent's scored repeats; a
    cell with none to fall back on stays empty."""
    flagged = table["flagged"].fillna(False).astype(bool) if "flagged" in table else pd.Series(False, index=table.index)
    # a flagged score is never the agent's: left out, or the base model's below
    table = table.assign(score=table["accuracy"].where(~flagged), substituted=False)
    if rules.missing != "base_model" or table.empty:
        return table
    is_base = table["agent"] == rules.base_agent
    base = table[is_base & ~flagged].dropna(subset=["accuracy"]).groupby(["task", "model"])["accuracy"].mean()
    eligible = ~is_base & pd.Series(
        [counts_as_base_model(o, bool(f)) for o, f in zip(table["outcome"], flagged, strict=True)], index=table.index
    )
    fill = pd.Series(base.reindex(pd.MultiIndex.from_frame(table[["task", "model"]])).to_numpy(), index=table.index)
    sub = eligible & fill.notna()
    table.loc[sub, "score"] = fill[sub]
    table.loc[sub, "substituted"] = True
    return table


def _task_stats(table: pd.DataFrame, models: list[str], tasks: list[str]) -> tuple[pd.DataFrame, pd.Series]:
    """Per (entry, task): mean, std over repeats and counts; and per (entry, task, run)
    the mean over models of each repeat in which every model has a value. One pass of
    grouped operations over the whole table (a loop per entry and task took seconds on
    20,000 cells)."""
    keys = ["entry", "task"]
    valued = table.dropna(subset=["score"])
    per_model = valued.groupby([*keys, "model"])["score"].mean()
    by_model = per_model.groupby(level=[0, 1]).agg(["mean", "size"])
    per_run = valued.groupby([*keys, "run", "model"])["score"].mean().groupby(level=[0, 1, 2]).agg(["mean", "size"])
    run_means = per_run.loc[per_run["size"] == len(models), "mean"]
    grid = pd.MultiIndex.from_product([sorted(table["entry"].unique()), tasks], names=keys)
    n_valued = valued.groupby(keys).size().reindex(grid, fill_value=0)
    n_substituted = valued.groupby(keys)["substituted"].sum().reindex(grid, fill_value=0).astype(int)
    n_models_scored = by_model["size"].reindex(grid, fill_value=0).astype(int)
    stats = pd.DataFrame(
        {
            "mean": by_model["mean"].reindex(grid),
            "std": run_means.groupby(level=[0, 1]).std(ddof=1).reindex(grid),
            "n_scored": n_valued - n_substituted,
            "n_substituted": n_substituted,
            "n_cells": table.groupby(keys).size().reindex(grid, fill_value=0),
            "n_models_scored": n_models_scored,
            "n_models": len(models),
            "complete": n_models_scored == len(models),
        },
        index=grid,
    )
    return stats, run_means


def _instruct_rows(rules: LeaderboardSettings, models: list[str]) -> list[dict[str, Any]]:
    rows = []
    for task, scores in sorted(rules.instruct_scores.items()):
        vals = [scores[m] for m in models if m in scores]
        rows.append(
            {
                "kind": INSTRUCT,
                "entry": "instruct models (published)",
                "task": task,
                "mean": sum(vals) / len(vals) if vals else math.nan,
                "std": math.nan,
                "n_scored": 0,
                "n_substituted": 0,
                "n_cells": 0,
                "n_models_scored": len(vals),
                "n_models": len(models),
                "complete": len(vals) == len(models),
            }
        )
    return rows


def _weighted_rows(per_task: pd.DataFrame, weights: Weights, run_means: pd.Series, left_out: set[str]) -> list[dict]:
    """One `weighted average` row per entry: empty unless every task of the average is
    complete (and for an entry left out). Its std is over the repeats in which every task
    of the average has a complete repeat mean."""
    tasks = list(weights.by_task)
    weighted = run_means.reset_index()
    weighted = weighted[weighted["task"].isin(tasks)]
    task_weight = weighted["task"].map(weights.by_task).to_numpy(dtype=float, na_value=math.nan)
    weighted = weighted.assign(value=weighted["mean"].to_numpy(dtype=float) * task_weight)
    per_run = weighted.groupby(["entry", "run"])["value"].agg(["sum", "size"])
    run_std = per_run.loc[per_run["size"] == len(tasks), "sum"].groupby(level=0).std(ddof=1)
    rows = []
    for (kind, entry), part in per_task.groupby(["kind", "entry"], sort=False):
        by_task = part.set_index("task")
        complete = bool(tasks) and all(t in by_task.index and by_task.loc[t, "complete"] for t in tasks)
        complete = complete and entry not in left_out
        mean = sum(weights.by_task[t] * by_task.loc[t, "mean"] for t in tasks) if complete else math.nan
        std = run_std.get(entry, math.nan) if complete and kind != INSTRUCT else math.nan
        rows.append(
            {
                "kind": kind,
                "entry": entry,
                "task": WEIGHTED,
                "mean": mean,
                "std": std,
                "n_scored": int(part["n_scored"].sum()),
                "n_substituted": int(part["n_substituted"].sum()),
                "n_cells": int(part["n_cells"].sum()),
                "n_models_scored": int(part["n_models_scored"].min()),
                "n_models": int(part["n_models"].max()),
                "complete": complete,
            }
        )
    return rows


def entry_holds(table: pd.DataFrame, rules: LeaderboardSettings) -> dict[str, str]:
    """Entry -> why it is not ranked: `ptb_lookup` (a judge found its agent looking up
    PostTrainBench itself: PostTrainBench stops for a human, here the entry waits unranked)
    or `no_verdict` (``missing_verdict: drop_entry``: a scored cell without a required
    verdict leaves the whole entry out). `table`: the cell table with `entry`; the base
    agent's rows never are (references, not judged entries)."""
    agents = table[table["agent"] != rules.base_agent]
    holds: dict[str, str] = {}
    if rules.missing_verdict == "drop_entry" and "verdict_missing" in agents:
        lacking = agents["verdict_missing"].fillna("").astype(str).ne("") & agents["outcome"].eq("scored")
        holds.update(dict.fromkeys(agents.loc[lacking, "entry"], NO_VERDICT))
    if rules.holds_ptb_lookup and "ptb_lookup" in agents:
        for entry in agents.loc[agents["ptb_lookup"].fillna(False).astype(bool), "entry"]:
            holds.setdefault(entry, PTB_HELD)
    return holds


def leaderboard(table: pd.DataFrame, rules: LeaderboardSettings) -> tuple[pd.DataFrame, Weights]:
    """Long-form leaderboard (rank, kind, entry, task, mean, std, counts, weight, held),
    ranked, and the weights. `table`: the cell table, with or without `with_fallback`'s
    columns."""
    if "score" not in table:
        table = with_fallback(table, rules)
    table = table.assign(entry=_entry_names(table))
    tasks = sorted(table["task"].unique())
    models = sorted(table["model"].unique())
    stats, run_means = _task_stats(table, models, tasks)
    kinds = table.drop_duplicates("entry").set_index("entry")["agent"].eq(rules.base_agent)
    stats.insert(0, "kind", stats.index.get_level_values("entry").map(kinds.map({True: BASE, False: AGENT})))
    rows = stats.reset_index()[["kind", "entry", "task", *stats.columns[1:]]].to_dict("records")
    base_means = {r["task"]: r["mean"] for r in rows if r["kind"] == BASE and r["complete"]}
    weights = task_weights(rules, tasks, base_means)
    holds = entry_holds(table, rules)
    rows += _instruct_rows(rules, models)
    left_out = {e for e, why in holds.items() if why == NO_VERDICT}
    rows += _weighted_rows(pd.DataFrame(rows), weights, run_means, left_out)
    board = pd.DataFrame(rows)
    board["weight"] = board["task"].map({**weights.by_task, WEIGHTED: 1.0})
    board["held"] = [holds.get(e, "") for e in board["entry"]]
    costs = gateway_cost_by_entry(table)
    if costs is not None:  # per entry, on each of its rows
        board = board.join(costs, on="entry")
    return _ranked(board, tasks), weights


def _ranked(board: pd.DataFrame, tasks: list[str]) -> pd.DataFrame:
    """Agents by weighted average, descending (ties by name; equal averages share a rank,
    entries without one come last, unranked, and so do held entries), then the base
    models, then the instruct models; each entry's tasks in order, its weighted average last."""
    averages = board[board["task"] == WEIGHTED].set_index("entry")
    agents = averages[averages["kind"] == AGENT]["mean"]
    held = set(averages.index[averages["held"] != ""])

    def key(e: str) -> tuple:
        unranked = e in held or math.isnan(agents[e])
        return (unranked, 0 if unranked else -agents[e], e)

    order = sorted(agents.index, key=key)
    rank: dict[str, int] = {}
    for i, entry in enumerate(order):
        if key(entry)[0]:
            break
        tied = i and math.isclose(agents[entry], agents[order[i - 1]], rel_tol=0, abs_tol=1e-12)
        rank[entry] = rank[order[i - 1]] if tied else i + 1
    for kind in (BASE, INSTRUCT):
        order += sorted(averages[averages["kind"] == kind].index)
    position = {entry: i for i, entry in enumerate(order)}
    task_position = {task: i for i, task in enumerate([*tasks, WEIGHTED])}
    board = board.assign(rank=board["entry"].map(rank).astype("Int64"))
    keys = board["entry"].map(position) * len(task_position) + board["task"].map(task_position)
    board = board.loc[keys.sort_values(kind="stable").index]
    return board[["rank", *(c for c in board.columns if c != "rank")]].reset_index(drop=True)


# -- rendering -----------------------------------------------------------------------------


def _fmt(r: Any) -> str:
    if r["kind"] == INSTRUCT:
        return "—" if math.isnan(r["mean"]) else f"{r['mean']:.3f}"
    subs = f"; {r['n_substituted']}{DAGGER}" if r["n_substituted"] else ""
    counts = f"({r['n_scored']}/{r['n_cells']}{subs})"
    if r["n_scored"] + r["n_substituted"] == 0 or math.isnan(r["mean"]):
        return f"— {counts}"
    std = "" if math.isnan(r["std"]) else f" ± {r['std']:.3f}"
    star = "" if r["complete"] else "*"
    return f"{r['mean']:.3f}{DAGGER if subs else ''}{std}{star} {counts}"


def leaderboard_wide(board: pd.DataFrame) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(header, [(kind, row)]): the ranked entries, then the references, by tasks and the
    weighted average; the first column is the rank (`—`: an agent without a weighted
    average, or held unranked (`‡` after its name); empty for reference rows). Entries
    left out for want of a verdict are not rows: ``verdict_sections`` lists them."""
    tasks = sorted(t for t in board["task"].unique() if t != WEIGHTED)
    cols = [*tasks, WEIGHTED]
    with_cost = "llm_cost_usd" in board
    rows = []
    for (kind, entry), part in board.groupby(["kind", "entry"], sort=False):
        held = part["held"].iloc[0] if "held" in part else ""
        if held == NO_VERDICT:
            continue  # left out: listed below the table
        by_task = part.set_index("task")
        first = part.iloc[0]
        shown_rank = "" if kind != AGENT else ("—" if pd.isna(first["rank"]) else str(first["rank"]))
        label = entry if kind == AGENT else f"{kind}: {entry}"
        label += f" {DOUBLE_DAGGER}" if held == PTB_HELD else ""
        cells = [_fmt(by_task.loc[t]) if t in by_task.index else "" for t in cols]
        if with_cost:  # reference rows ran no agent: nothing to show
            cost = gateway_cost_text(first["llm_cost_usd"], first["llm_cost_cells"], first["llm_cells"])
            cells.append(cost if kind == AGENT else "")
        rows.append((kind, [shown_rank, label, *cells]))
    return ["rank", "entry", *cols, *([COST] if with_cost else [])], rows


def footnotes(board: pd.DataFrame, table: pd.DataFrame | None = None) -> list[str]:
    """The footnotes on substituted values, entries held unranked or left out, verdicts
    set by hand and the gateway's cost column, when there are any."""
    notes = [FOOTNOTE] if board["n_substituted"].sum() else []
    held = set(board["held"]) if "held" in board else set()
    if PTB_HELD in held:
        notes.append(PTB_FOOTNOTE)
    if NO_VERDICT in held:
        notes.append(NO_VERDICT_FOOTNOTE)
    if table is not None and "override" in table and table["override"].fillna("").astype(bool).any():
        notes.append(OVERRIDE_FOOTNOTE)
    if "llm_cost_usd" in board:
        notes.append(COST_NOTE)
    return notes


def weights_line(weights: Weights) -> str:
    if weights.by_task:
        wline = ", ".join(f"{t} {w:.3f}" for t, w in weights.by_task.items())
        line = f"Task weights ({weights.rule}): {wline}."
    else:
        line = f"No weighted average: weights ({weights.rule}) undefined: {weights.problem}."
    return " ".join([*weights.notes, line])


def _cells_where(table: pd.DataFrame, column: str) -> pd.DataFrame:
    if column not in table:
        return table.iloc[:0]
    values = table[column]
    return table[values.fillna(False).astype(bool) if values.dtype == bool else values.fillna("").astype(str).ne("")]


def verdict_sections(board: pd.DataFrame, table: pd.DataFrame) -> list[tuple[str, list[str], list[list[Any]]]]:
    """(title, header, rows) of the judges' sections below the leaderboard: entries held
    unranked for a PTB lookup, entries left out for want of a verdict, verdicts set by
    hand. One list for the Markdown and the HTML page."""
    held = board.drop_duplicates("entry").set_index("entry")["held"] if "held" in board else pd.Series(dtype=str)
    cells = ["agent", "task", "model", "hours", "num_gpus", "run"]
    head = ["agent", "task", "model", "hours", "GPUs", "run"]
    sections = []
    looked = _cells_where(table, "ptb_lookup")
    if (held == PTB_HELD).any() and len(looked):
        rows = looked[[*cells, "ptb_lookup_justification"]].values.tolist()
        sections.append((f"Entries not ranked: PTB lookup ({DOUBLE_DAGGER})", [*head, "justification"], rows))
    lacking = _cells_where(table, "verdict_missing")
    if (held == NO_VERDICT).any() and len(lacking):
        rows = lacking[lacking["outcome"] == "scored"][[*cells, "verdict_missing"]].values.tolist()
        left_out = ", ".join(held[held == NO_VERDICT].index)
        title = f"Entries left out: scored cells without a required verdict ({left_out})"
        sections.append((title, [*head, "missing verdicts"], rows))
    overridden = _cells_where(table, "override")
    if len(overridden):
        rows = overridden[[*cells, "override"]].values.tolist()
        sections.append((f"Verdicts set by hand ({JUDGEMENT_OVERRIDE})", [*head, "override"], rows))
    return sections


def held_lines(board: pd.DataFrame) -> list[str]:
    """One line per entry held unranked or left out, for collect's output."""
    held = board.drop_duplicates("entry").set_index("entry")["held"] if "held" in board else pd.Series(dtype=str)
    why = {
        PTB_HELD: "not ranked: a judge found its agent looking up PostTrainBench itself; review the cells "
        f"(leaderboard.md lists them), then rerun collect, with a {JUDGEMENT_OVERRIDE} where the judge was wrong",
        NO_VERDICT: "left out: scored cells without a required verdict (leaderboard.missing_verdict: drop_entry); "
        f"run the judge on them, or write a {JUDGEMENT_OVERRIDE}",
    }
    return [f"entry {terminal_line(entry)} {why[h]}" for entry, h in held.items() if h in why]


def solved_again(table: pd.DataFrame) -> pd.DataFrame:
    """The cells whose agent ran more than once (a solve redone after one died or was
    interrupted): their scores count, and the leaderboard names them."""
    if "solve_attempts" not in table:
        return table.iloc[:0]
    return table[table["solve_attempts"].fillna(1) > 1]


def leaderboard_markdown(board: pd.DataFrame, weights: Weights, table: pd.DataFrame) -> str:
    """The leaderboard, its legend and weights, the cell counts and every cell without a score."""
    head, rows = leaderboard_wide(board)
    counts = table["outcome"].value_counts()
    summary = ", ".join(f"{n} {k}" for k, n in counts.items())
    # every value goes through markdown_table: agent-written text (evidence, file names,
    # config fields, a judge's justification) stays inside its cell
    out = ["# Leaderboard", "", LEGEND, "", *markdown_table(head, (r for _, r in rows)), ""]
    out += [f"{note}\n" for note in footnotes(board, table)] + [markdown_cell(weights_line(weights)), ""]
    out += [markdown_cell(f"Cells: {len(table)} ({summary})."), ""]
    again = solved_again(table)
    if len(again):
        # never silent: a cell whose agent had more than one try is named, with its tries
        out += ["## Cells solved more than once (the agent had several tries)", ""]
        tries = again[["agent", "task", "model", "hours", "num_gpus", "run", "solve_attempts", "outcome"]]
        head = ["agent", "task", "model", "hours", "GPUs", "run", "tries", "outcome"]
        out += [*markdown_table(head, tries.itertuples(index=False)), ""]
    out += token_usage_markdown(table) if "input_tokens" in table else []
    unscored = table[table["outcome"] != "scored"]
    if len(unscored):
        out += ["## Cells without a score", ""]
        out += [*markdown_table(_UNSCORED_HEAD, unscored[UNSCORED_COLUMNS].itertuples(index=False)), ""]
    flagged = flagged_cells(table)
    if len(flagged):
        out += ["## Flagged cells (judge)", ""]
        out += [*markdown_table(_FLAGGED_HEAD, flagged[FLAGGED_COLUMNS].itertuples(index=False)), ""]
    for title, head, rows in verdict_sections(board, table):
        out += [f"## {markdown_cell(title)}", "", *markdown_table(head, rows), ""]
    return "\n".join(out)


def _html_row(values: Iterable[object], tag: str = "td", attrs: str = "") -> str:
    return f"<tr{attrs}>" + "".join(f"<{tag}>{html.escape(str(v))}</{tag}>" for v in values) + "</tr>"


def _html_section(
    heading: str, table_attrs: str, head: Sequence[object], rows: Iterable[Iterable[object]]
) -> list[str]:
    """A heading and its table, every value escaped (agent-written text stays text)."""
    return [
        f"<h2>{html.escape(heading)}</h2><table {table_attrs}>",
        _html_row(head, "th"),
        *(_html_row(r) for r in rows),
        "</table>",
    ]


def leaderboard_html(board: pd.DataFrame, weights: Weights, table: pd.DataFrame, images: list[Path]) -> str:
    """One self-contained page: the leaderboard table, its legend and weights, the plots
    (embedded), and every cell without a score with its evidence."""
    head, rows = leaderboard_wide(board)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Leaderboard</title><style>{_STYLE}</style>"]
    parts += ["</head><body><h1>Leaderboard</h1>", f"<p>{html.escape(LEGEND)}</p>", "<table id='leaderboard'>"]
    parts.append(_html_row(head, "th"))
    parts += [_html_row(r, attrs="" if kind == AGENT else " class='ref'") for kind, r in rows]
    parts.append("</table>")
    parts += [f"<p class='footnote'>{html.escape(note)}</p>" for note in footnotes(board, table)]
    parts.append(f"<p>{html.escape(weights_line(weights))}</p>")
    if "input_tokens" in table and not table[list(TOKEN_USAGE_COLUMNS)].isna().all().all():
        parts += _html_section("Tokens and cost per entry", "id='usage'", *token_usage_rows(table))
    for img in images:
        data = base64.b64encode(img.read_bytes()).decode()
        parts.append(f"<p><img alt='{html.escape(img.stem)}' src='data:image/png;base64,{data}'></p>")
    unscored = table[table["outcome"] != "scored"]
    if len(unscored):
        rows = unscored[UNSCORED_COLUMNS].itertuples(index=False)
        parts += _html_section(f"Cells without a score ({len(unscored)})", "id='unscored'", _UNSCORED_HEAD, rows)
    flagged = flagged_cells(table)
    if len(flagged):
        rows = flagged[FLAGGED_COLUMNS].itertuples(index=False)
        parts += _html_section(f"Flagged cells ({len(flagged)})", "id='flagged'", _FLAGGED_HEAD, rows)
    for title, head, rows in verdict_sections(board, table):
        parts += _html_section(title, "class='verdicts'", head, rows)
    parts.append("</body></html>")
    return "\n".join(parts)
