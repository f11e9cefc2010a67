"""Tokens and cost per leaderboard entry, from each cell's usage.json (parse_trace).

A quantity a cell's trace does not state is unknown (None), never 0: means and totals
are over the cells that state it, and say how many that is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ptb_harness.core.cell_files import USAGE, USAGE_QUANTITIES, UsageRecord
from ptb_harness.core.text import markdown_table
from ptb_harness.results.llm_spend import usd_text

#: usage.json's quantities, as cells.csv columns
TOKEN_USAGE_COLUMNS = USAGE_QUANTITIES
#: where usage.json's tokens and cost come from (a cells.csv column): ``gateway`` (the cell's
#: LLM gateway metered the provider's answers) or ``trace`` (the agent's own figures)
USAGE_SOURCE = "usage_source"
#: usage.json's ``disagreement`` (a cells.csv column): where the trace's own figures differ
#: from the gateway's by more than 10%, in words (evidence: forged usage in the trace)
USAGE_DISAGREEMENT = "usage_disagreement"


def cell_token_usage(cell_dir: Path | None) -> dict[str, Any]:
    """usage.json's quantities of a cell (all None when cell_dir is None: no usage.json)."""
    record = (UsageRecord.read(Path(cell_dir) / USAGE) if cell_dir is not None else None) or UsageRecord()
    out: dict[str, Any] = {}
    for key in TOKEN_USAGE_COLUMNS:
        v = getattr(record, key)
        out[key] = v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    out[USAGE_SOURCE] = record.source if record.source in ("gateway", "trace") else None
    text = record.disagreement
    out[USAGE_DISAGREEMENT] = text[:500] if isinstance(text, str) and out[USAGE_SOURCE] == "gateway" else None
    return out


def typed_token_usage(table: pd.DataFrame) -> pd.DataFrame:
    """The usage columns as nullable integers (tokens, counts) and floats (cost)."""
    for col in TOKEN_USAGE_COLUMNS:
        table[col] = pd.to_numeric(table[col]) if col == "cost_usd" else table[col].astype("Int64")
    return table


def token_usage_by_entry(table: pd.DataFrame) -> pd.DataFrame:
    """Per agent entry: cells, and for tokens and cost the mean per cell and the campaign
    total over the cells whose trace states them (`*_cells` says how many)."""
    rows = []
    for agent, cells in table.groupby("agent", sort=False):
        row: dict[str, Any] = {"agent": agent, "cells": len(cells)}
        for col in ("input_tokens", "output_tokens", "cost_usd"):
            known = cells[col].dropna()
            row[f"{col}_cells"] = len(known)
            row[f"{col}_mean"] = float(known.mean()) if len(known) else None
            row[f"{col}_total"] = float(known.sum()) if len(known) else None
        rows.append(row)
    return pd.DataFrame(rows)


def format_usd(value: Any) -> str:
    """A cost: in cents, or four decimals under a cent (a test cell's cost: never shown as
    $0.00 when it is not 0); ``unknown`` when it is not known."""
    if value is None or pd.isna(value):
        return "unknown"
    return usd_text(value)


def gateway_cost_by_entry(table: pd.DataFrame) -> pd.DataFrame | None:
    """Per leaderboard entry (``table["entry"]``): ``llm_cost_usd``, the mean cost per cell
    that its LLM gateway metered, over the ``llm_cost_cells`` cells whose cost is known, of
    the ``llm_cells`` with a gateway meter; None when no cell of the campaign has one."""
    if USAGE_SOURCE not in table or not (table[USAGE_SOURCE] == "gateway").any():
        return None
    metered = table[table[USAGE_SOURCE] == "gateway"]
    costs = pd.to_numeric(metered["cost_usd"])
    out = pd.DataFrame(
        {
            "llm_cost_usd": costs.groupby(metered["entry"]).mean(),
            "llm_cost_cells": costs.notna().groupby(metered["entry"]).sum(),
            "llm_cells": metered.groupby("entry").size(),
        }
    )
    out = out.reindex(pd.Index(table["entry"].unique(), name="entry"))
    counts = {"llm_cost_cells": 0, "llm_cells": 0}
    return out.fillna(counts).astype(dict.fromkeys(counts, int))


def gateway_cost_text(mean: Any, known: Any, cells: Any) -> str:
    """An entry's LLM cost per cell as the leaderboard shows it: ``unknown`` (never 0) when
    no cell's gateway cost is known, and how many cells it is over when not all."""
    known, cells = int(known or 0), int(cells or 0)
    if not known:
        return "unknown"
    return format_usd(mean) + ("" if known == cells else f" ({known} of {cells} cells)")


def _fmt(value: Any, cost: bool = False) -> str:
    if value is None or pd.isna(value):
        return "unknown"
    return format_usd(value) if cost else f"{value:,.0f}"


def token_usage_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the usage table shown under the leaderboard."""
    head = ["agent", "input tokens / cell", "output tokens / cell", "cost / cell", "input tokens, total",
            "output tokens, total", "cost, total", "cells with tokens / cost"]  # fmt: skip
    rows = []
    for r in token_usage_by_entry(table).to_dict("records"):
        rows.append(
            [
                str(r["agent"]),
                _fmt(r["input_tokens_mean"]),
                _fmt(r["output_tokens_mean"]),
                _fmt(r["cost_usd_mean"], cost=True),
                _fmt(r["input_tokens_total"]),
                _fmt(r["output_tokens_total"]),
                _fmt(r["cost_usd_total"], cost=True),
                f"{r['input_tokens_cells']} / {r['cost_usd_cells']} of {r['cells']}",
            ]
        )
    return head, rows


def token_usage_markdown(table: pd.DataFrame) -> list[str]:
    if not len(table) or table[list(TOKEN_USAGE_COLUMNS)].isna().all().all():
        return []
    head, rows = token_usage_rows(table)
    out = ["## Tokens and cost per entry", "", *markdown_table(head, rows)]
    return [*out, "", "Means and totals are over the cells whose trace states them; `unknown`: none does.", ""]
