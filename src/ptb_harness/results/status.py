"""`ptb-harness status`: where a campaign stands, from its files alone (no Snakemake DAG).

A grid with a row per agent and model and a column per task. Each entry has one mark
per cell (hours, GPUs and repeat, in that order): S scored, F scored but flagged by the
judge (or not judged yet, with the judge on), A agent_failed, I infra_failed, R running,
. pending. Under it, the counts per outcome, with ``--spend`` what the agents spent on
their models so far per entry (their cells' LLM gateways' logs, running cells and earlier
attempts included: a listing and a read more per cell, so only when asked), and every
cell that failed or runs, with its evidence.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import Cell
from ptb_harness.core.cell_files import JUDGEMENT_OVERRIDE, METRICS
from ptb_harness.core.layout import cell_dir_rel
from ptb_harness.core.text import terminal_line, valid_text
from ptb_harness.results.cell_index import writable_index
from ptb_harness.results.flags import cell_flag
from ptb_harness.results.llm_spend import Spend, cell_spend, spend_line
from ptb_harness.results.outcome import (
    FLAGGED_MARK,
    MARKS,
    OUTCOMES,
    Liveness,
    cell_outcome,
    final_from_records,
    local_liveness,
    map_cells,
    marks_legend,
)
from ptb_harness.results.status_index import STATUS_SPEC
from ptb_harness.runtime.scheduler import live_slurm_jobs


@dataclass(frozen=True)
class CellStatus:
    cell: Cell
    outcome: str
    evidence: str
    #: metrics.json as Snakemake names it (relative to the working directory, as configured)
    target: str
    #: the judge's flag of a scored cell, e.g. "contamination" or "judge_failed"; "" when none
    flag: str = ""
    flag_justification: str = ""
    #: a counted PTB-lookup verdict of a scored cell (its entry is not ranked): why; "" when none
    ptb_lookup: str = ""
    #: a judgement_override.json applied: what it sets, who and why; "" when none
    override: str = ""
    #: a metrics.json exists (whether or not the records vouch for it)
    metrics_present: bool = False
    #: what its LLM gateways metered, every attempt (None: no request log)
    spend: Spend | None = None

    @property
    def mark(self) -> str:
        return FLAGGED_MARK if self.flag and self.outcome == "scored" else MARKS[self.outcome]

    def as_dict(self, spend: bool = False) -> dict[str, Any]:
        spent = {"llm_spend": self.spend.record() if self.spend is not None else None} if spend else {}
        return {
            **self.cell.wildcards,
            "outcome": self.outcome,
            # valid Unicode for any JSON reader (json.dumps escapes every control character)
            "evidence": valid_text(self.evidence),
            "target": self.target,
            "flag": valid_text(self.flag),
            **spent,
        }


def campaign_status(
    campaign: Campaign, alive: Liveness | None = None, spend: bool = False, use_index: bool = True
) -> list[CellStatus]:
    """The outcome of every cell (with ``spend``, what its LLM gateways metered); a record
    of a running stage is checked against this host's processes and (asked once, only if
    needed) Slurm's queue. A scored cell whose records are as the status index saw them
    last is taken from it (``use_index``; not with ``spend``), and the index is written
    back (``results.status_index``)."""
    results = campaign.settings.paths.results_dir_text
    root = str(campaign.results_dir)  # resolved once, not per cell
    alive = alive or local_liveness(live_slurm_jobs)
    judged = campaign.settings.judge.enabled
    counted = campaign.settings.leaderboard.judges
    cells = list(campaign.cells())
    rels = [cell_dir_rel(cell.wildcards) for cell in cells]
    cells_by_rel = dict(zip(rels, cells, strict=True))
    settings = {"judged": judged, "counted": list(counted)}
    index = writable_index(STATUS_SPEC, root, settings) if use_index and not spend else None

    def read(rel: str) -> CellStatus:
        cell_dir = f"{root}/{rel}"
        kept = index.lookup(rel, cell_dir) if index is not None else None
        if kept is not None:
            return CellStatus(cells_by_rel[rel], target=f"{results}/{rel}/{METRICS}", **kept)
        signed = index.sign(cell_dir) if index is not None else None  # before the records are read
        outcome, evidence, rec = cell_outcome(cell_dir, alive, all_records=False)
        flag = cell_flag(cell_dir, judged, counted) if outcome == "scored" else None
        fields = {
            "outcome": outcome,
            "evidence": evidence,
            "flag": flag.reason if flag else "",
            "flag_justification": flag.justification if flag else "",
            "metrics_present": any(v is not None for v in (rec.metrics, rec.metrics_sha256, rec.metrics_problem)),
            "ptb_lookup": (flag.ptb_lookup_justification or "the PTB-lookup verdict")
            if flag and flag.ptb_lookup
            else "",
            "override": flag.override if flag else "",
        }
        if index is not None and (outcome == "scored" or outcome == "agent_failed" and final_from_records(rec)):
            index.keep(rel, signed, fields)
        spent = cell_spend(cell_dir) if spend else None
        return CellStatus(cells_by_rel[rel], target=f"{results}/{rel}/{METRICS}", spend=spent, **fields)

    statuses = map_cells(read, rels)
    if index is not None:
        index.save(rels)
    return statuses


def counts(statuses: list[CellStatus]) -> dict[str, int]:
    c = Counter(s.outcome for s in statuses)
    return {k: c.get(k, 0) for k in OUTCOMES}


def spend_by_entry(statuses: list[CellStatus]) -> tuple[Spend, dict[str, Spend], int]:
    """(the campaign's spend, each entry's, the cells running among those spending)."""
    total, entries, running = Spend(), {}, 0
    for s in statuses:
        if s.spend is not None:
            total += s.spend
            entries[s.cell.agent] = entries.get(s.cell.agent, Spend()) + s.spend
            running += s.outcome == "running"
    return total, entries, running


def spend_lines(statuses: list[CellStatus]) -> list[str]:
    """The LLM spend so far, the campaign's and per entry (read with campaign_status's
    ``spend``); none when no cell has a log."""
    total, entries, running = spend_by_entry(statuses)
    if not entries:
        return ["LLM spend so far: no cell has a gateway log"]
    now = f", {running} running" if running else ""
    out = [f"LLM spend so far (the cells' gateways{now}): {spend_line(total)}"]
    width = max(len(terminal_line(e)) for e in entries)
    out += [f"  {terminal_line(e):<{width}}  {spend_line(entries[e])}" for e in sorted(entries)]
    return out


def grid(statuses: list[CellStatus]) -> list[str]:
    """Rows agent/model, columns task, one mark per cell."""
    tasks = sorted({s.cell.task for s in statuses})
    entries: dict[tuple[str, str], dict[str, list[tuple[Any, str]]]] = {}
    for s in statuses:
        row = entries.setdefault((s.cell.agent, s.cell.model), {})
        key = (float(s.cell.hours), s.cell.num_gpus, s.cell.run)
        row.setdefault(s.cell.task, []).append((key, s.mark))
    head = ["agent / model", *map(terminal_line, tasks)]
    rows = [
        [terminal_line(f"{agent} / {model}"), *("".join(m for _, m in sorted(by_task.get(t, []))) for t in tasks)]
        for (agent, model), by_task in entries.items()
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in [head, *rows]]


def _where(s: CellStatus) -> str:
    return terminal_line(s.target.removesuffix(f"/{METRICS}"))


def render(campaign: Campaign, statuses: list[CellStatus], show_pending: bool = False, spend: bool = False) -> str:
    """The grid, counts and listed cells; every text from the records is one terminal_line
    (an agent's ESC bytes or newlines in its evidence never reach the terminal raw)."""
    total = counts(statuses)
    out = [f"campaign {terminal_line(campaign.name)}: {len(statuses)} cells"]
    out.append("  " + ", ".join(f"{n} {k}" for k, n in total.items()))
    out += [
        "",
        f"marks: {marks_legend(flagged=True)} (hours, GPUs, repeat)",
    ]
    out += grid(statuses)
    out += ["", *spend_lines(statuses)] if spend else []
    listed = [s for s in statuses if s.outcome != "scored" and (show_pending or s.outcome != "pending")]
    if listed:
        out += ["", "cells without a score:"]
        out += [f"  {s.outcome:<12} {_where(s)}: {terminal_line(s.evidence)}" for s in listed]
    flagged = [s for s in statuses if s.flag]
    if flagged:
        out += ["", "flagged by the judge (not counted as the agent's score):"]
        out += [
            f"  {terminal_line(s.flag):<12} {_where(s)}: {terminal_line(s.flag_justification[:300])}" for s in flagged
        ]
    looked = [s for s in statuses if s.ptb_lookup]
    if looked:
        out += ["", f"PTB lookup (the entry is not ranked until a reviewer decides: {JUDGEMENT_OVERRIDE}):"]
        out += [f"  {_where(s)}: {terminal_line(s.ptb_lookup[:300])}" for s in looked]
    overridden = [s for s in statuses if s.override]
    if overridden:
        out += ["", f"verdicts set by hand ({JUDGEMENT_OVERRIDE}):"]
        out += [f"  {_where(s)}: {terminal_line(s.override[:300])}" for s in overridden]
    pending = Counter(s.evidence for s in statuses if s.outcome == "pending")
    if pending and not show_pending:
        why = "; ".join(f"{n} {terminal_line(evidence)}" for evidence, n in pending.most_common())
        out += ["", f"pending (--all lists them): {why}"]
    rerun = total["pending"] + total["infra_failed"]
    if rerun:
        out += ["", f"{rerun} cells can still be scored; `ptb-harness status --targets` names their {METRICS}."]
    if total["agent_failed"]:
        out += [
            f"{total['agent_failed']} cells are agent_failed: final, left out of --targets "
            "(--include-agent-failed lists them too)."
        ]
    return "\n".join(out)


def as_json(campaign: Campaign, statuses: list[CellStatus], spend: bool = False) -> str:
    spent = {"llm_spend": _spend_json(statuses)} if spend else {}
    return json.dumps(
        {
            "campaign": campaign.name,
            "results_dir": str(campaign.results_dir),
            "counts": counts(statuses),
            **spent,
            "cells": [s.as_dict(spend) for s in statuses],
        },
        indent=1,
    )


def _spend_json(statuses: list[CellStatus]) -> dict[str, Any]:
    total, entries, running = spend_by_entry(statuses)
    return {**total.record(), "running_cells": running, "entries": {e: entries[e].record() for e in sorted(entries)}}


def targets(statuses: list[CellStatus], include_agent_failed: bool = False) -> list[str]:
    """metrics.json of every cell that lacks a score and is not running: give these to
    Snakemake and it plans only them (fast at any campaign size). An agent's failure is
    final (rescoring a model that cannot be loaded fails the same way, every time), so
    agent_failed cells are left out unless asked for. A cell whose metrics.json exists but
    is not vouched for (records disagree, invalid) is also named after `--forcerun`, last
    on the line: Snakemake would otherwise find the file and do nothing."""
    skip = {"scored", "running"} | (set() if include_agent_failed else {"agent_failed"})
    redo = [s.target for s in statuses if s.outcome not in skip]
    forced = [s.target for s in statuses if s.outcome == "infra_failed" and s.metrics_present]
    return redo + (["--forcerun", *forced] if forced else [])
