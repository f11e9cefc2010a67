"""Tables of a campaign, from whatever exists on disk: one row per cell, and a leaderboard.

Cells that are not scored appear with their outcome and evidence, never as a zero, and
every mean says how many scored cells it stands on.

The leaderboard has a row per entry (an agent, or an agent at one budget and GPU count
when the campaign has several) and per task:
- `mean`: the mean over models of each model's mean over its scored repeats;
- `std`: the sample standard deviation over repeats of the per-repeat mean over models
  (repeats in which every model is scored; empty with fewer than two);
- `n_scored`/`n_cells`: the cells behind it. A task some model has no score for is
  `complete = False`, and an entry's weighted average needs every task complete.
Reference rows: the base models (the `leaderboard.base_agent`'s cells, normally `noop`)
and, when configured, the instruct models' published scores.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ptb_harness.campaign.cells import Campaign
from ptb_harness.core.records import atomic_write_text
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
WEIGHTED = "weighted average"
BASE, INSTRUCT, AGENT = "base model", "instruct model", "agent"


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


def _entry_names(table: pd.DataFrame) -> pd.Series:
    """An agent's name, with its budget and GPUs when the campaign has several settings."""
    settings = table[["hours", "num_gpus"]].drop_duplicates()
    if len(settings) <= 1:
        return table["agent"]
    return table["agent"] + " (" + table["hours"].astype(str) + "h, " + table["num_gpus"].astype(str) + " GPU)"


@dataclass(frozen=True)
class Weights:
    """Task weights (sum 1), how they were made, and why none could be made (or '')."""

    by_task: dict[str, float]
    rule: str
    problem: str = ""


def task_weights(board_config: Mapping[str, Any], tasks: list[str], base_means: Mapping[str, float]) -> Weights:
    """The weights of `leaderboard.weighting`. For `inverse_gap` (PostTrainBench):
    w_t proportional to 1 / (instruct_t - base_t), instruct_t the mean over models of the
    configured instruct scores, base_t the base models' mean score; normalised to sum 1."""
    rule = board_config.get("weighting", "equal")
    if rule == "equal":
        return Weights({t: 1 / len(tasks) for t in tasks}, rule)
    if rule == "explicit":
        raw = {t: float(board_config["weights"][t]) for t in tasks}
    else:
        raw = {}
        for t in tasks:
            scores = board_config["instruct_scores"][t]
            instruct = sum(scores.values()) / len(scores)
            base = base_means.get(t)
            if base is None or math.isnan(base):
                return Weights({}, rule, f"task {t}: the base models have no complete score yet")
            if instruct <= base:
                return Weights({}, rule, f"task {t}: instruct {instruct:.4f} <= base {base:.4f}, no gap to weigh by")
            raw[t] = 1 / (instruct - base)
    total = sum(raw.values())
    return Weights({t: w / total for t, w in raw.items()}, rule)


def _task_stats(cells: pd.DataFrame, models: list[str]) -> dict[str, Any]:
    """mean, std over repeats, counts of one entry's cells for one task."""
    scored = cells.dropna(subset=["accuracy"])
    per_model = scored.groupby("model")["accuracy"].mean()
    per_run = scored.pivot_table(index="run", columns="model", values="accuracy", aggfunc="mean")
    complete_runs = per_run.reindex(columns=models).dropna()
    run_means = complete_runs.mean(axis=1)
    return {
        "mean": per_model.mean() if len(per_model) else math.nan,
        "std": run_means.std(ddof=1) if len(run_means) >= 2 else math.nan,
        "n_scored": len(scored),
        "n_cells": len(cells),
        "n_models_scored": len(per_model),
        "n_models": len(models),
        "complete": len(per_model) == len(models),
        "_run_means": run_means,
    }


def leaderboard(table: pd.DataFrame, board_config: Mapping[str, Any] | None = None) -> tuple[pd.DataFrame, Weights]:
    """Long-form leaderboard (kind, entry, task, mean, std, counts, weight) and the weights."""
    board_config = board_config or {}
    base_agent = board_config.get("base_agent", "noop")
    table = table.assign(entry=_entry_names(table))
    tasks = sorted(table["task"].unique())
    models = sorted(table["model"].unique())
    rows = []
    run_means: dict[tuple[str, str], pd.Series] = {}
    for (entry, agent), cells in table.groupby(["entry", "agent"], sort=True):
        kind = BASE if agent == base_agent else AGENT
        for task in tasks:
            stats = _task_stats(cells[cells["task"] == task], models)
            run_means[(entry, task)] = stats.pop("_run_means")
            rows.append({"kind": kind, "entry": entry, "task": task, **stats})
    base_means = {r["task"]: r["mean"] for r in rows if r["kind"] == BASE and r["complete"]}
    weights = task_weights(board_config, tasks, base_means)
    for task, scores in sorted((board_config.get("instruct_scores") or {}).items()):
        vals = [scores[m] for m in models if m in scores]
        rows.append(
            {
                "kind": INSTRUCT,
                "entry": "instruct models (published)",
                "task": task,
                "mean": sum(vals) / len(vals) if vals else math.nan,
                "std": math.nan,
                "n_scored": 0,
                "n_cells": 0,
                "n_models_scored": len(vals),
                "n_models": len(models),
                "complete": len(vals) == len(models),
            }
        )
    per_task = pd.DataFrame(rows)
    for (kind, entry), part in per_task.groupby(["kind", "entry"], sort=False):
        by_task = part.set_index("task")
        complete = bool(weights.by_task) and all(t in by_task.index and by_task.loc[t, "complete"] for t in tasks)
        mean = sum(weights.by_task[t] * by_task.loc[t, "mean"] for t in tasks) if complete else math.nan
        std = math.nan
        if complete and kind != INSTRUCT:
            per_run = pd.concat([run_means[(entry, t)] * weights.by_task[t] for t in tasks], axis=1).dropna()
            std = per_run.sum(axis=1).std(ddof=1) if len(per_run) >= 2 else math.nan
        rows.append(
            {
                "kind": kind,
                "entry": entry,
                "task": WEIGHTED,
                "mean": mean,
                "std": std,
                "n_scored": int(part["n_scored"].sum()),
                "n_cells": int(part["n_cells"].sum()),
                "n_models_scored": int(part["n_models_scored"].min()),
                "n_models": len(models),
                "complete": complete,
            }
        )
    board = pd.DataFrame(rows)
    board["weight"] = board["task"].map({**weights.by_task, WEIGHTED: 1.0})
    order = {AGENT: 0, BASE: 1, INSTRUCT: 2}
    board = board.sort_values(["kind", "entry", "task"], key=lambda c: c.map(order) if c.name == "kind" else c)
    return board.reset_index(drop=True), weights


def _fmt(r: Any) -> str:
    if r["kind"] == INSTRUCT:
        return "—" if math.isnan(r["mean"]) else f"{r['mean']:.3f}"
    if r["n_scored"] == 0 or math.isnan(r["mean"]):
        return f"— ({r['n_scored']}/{r['n_cells']})"
    std = "" if math.isnan(r["std"]) else f" ± {r['std']:.3f}"
    star = "" if r["complete"] else "*"
    return f"{r['mean']:.3f}{std}{star} ({r['n_scored']}/{r['n_cells']})"


def leaderboard_wide(board: pd.DataFrame) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(header, [(kind, row)]): entries (agents, then references) by tasks and the
    weighted average."""
    tasks = sorted(t for t in board["task"].unique() if t != WEIGHTED)
    cols = [*tasks, WEIGHTED]
    rows = []
    for (kind, entry), part in board.groupby(["kind", "entry"], sort=False):
        by_task = part.set_index("task")
        label = entry if kind == AGENT else f"{kind}: {entry}"
        rows.append((kind, [label, *(_fmt(by_task.loc[t]) if t in by_task.index else "" for t in cols)]))
    return ["entry", *cols], rows


LEGEND = (
    "Accuracy: mean over models of the mean over repeats; ± sample std over repeats; "
    "(scored/total cells); * = some model has no score for this task; — = nothing scored."
)


def weights_line(weights: Weights) -> str:
    if weights.by_task:
        wline = ", ".join(f"{t} {w:.3f}" for t, w in weights.by_task.items())
        return f"Task weights ({weights.rule}): {wline}."
    return f"No weighted average: weights ({weights.rule}) undefined: {weights.problem}."


def leaderboard_markdown(board: pd.DataFrame, weights: Weights, table: pd.DataFrame) -> str:
    head, rows = leaderboard_wide(board)
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---|" * (len(head) - 1)]
    lines += ["| " + " | ".join(r) + " |" for _, r in rows]
    counts = table["outcome"].value_counts()
    summary = ", ".join(f"{n} {k}" for k, n in counts.items())
    out = [
        "# Leaderboard",
        "",
        LEGEND,
        "",
        *lines,
        "",
        weights_line(weights),
        "",
        f"Cells: {len(table)} ({summary}).",
        "",
    ]
    unscored = table[table["outcome"] != "scored"]
    if len(unscored):
        out += ["## Cells without a score", "", "| agent | task | model | hours | GPUs | run | outcome | evidence |"]
        out += ["|---|---|---|---|---|---|---|---|"]
        for r in unscored.itertuples():
            evidence = str(r.evidence).replace("|", "\\|")
            out.append(
                f"| {r.agent} | {r.task} | {r.model} | {r.hours} | {r.num_gpus} | {r.run} | {r.outcome} | {evidence} |"
            )
        out.append("")
    return "\n".join(out)


def write_tables(
    campaign: Campaign, cells_csv: Path, leaderboard_csv: Path, leaderboard_md: Path
) -> tuple[pd.DataFrame, pd.DataFrame, Weights]:
    """The three tables, each written atomically; returns (cell table, leaderboard, weights)."""
    table = cell_table(campaign)
    board, weights = leaderboard(table, campaign.config.get("leaderboard"))
    atomic_write_text(cells_csv, table.to_csv(index=False))
    atomic_write_text(leaderboard_csv, board.to_csv(index=False))
    atomic_write_text(leaderboard_md, leaderboard_markdown(board, weights, table))
    return table, board, weights
