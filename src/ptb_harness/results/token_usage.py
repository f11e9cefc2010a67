"""Tokens and cost per leaderboard entry, from each cell's usage.json (parse_trace).

A quantity a cell's trace does not state is unknown (None), never 0: means and totals
are over the cells that state it, and say how many that is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ptb_harness.core.cell_files import USAGE, UsageRecord
from ptb_harness.core.text import markdown_table

#: usage.json's quantities, as cells.csv columns
TOKEN_USAGE_COLUMNS = ("input_tokens", "output_tokens", "cached_tokens", "cost_usd", "turns", "tool_calls", "resumes")


def cell_token_usage(cell_dir: Path | None) -> dict[str, Any]:
    """usage.json's quantities of a cell (all None when cell_dir is None: no usage.json)."""
    record = (UsageRecord.read(Path(cell_dir) / USAGE) if cell_dir is not None else None) or UsageRecord()
    out: dict[str, Any] = {}
    for key in TOKEN_USAGE_COLUMNS:
        v = getattr(record, key)
        out[key] = v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
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


def _fmt(value: Any, cost: bool = False) -> str:
    if value is None or pd.isna(value):
        return "unknown"
    return f"${value:,.2f}" if cost else f"{value:,.0f}"


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
