"""Tokens and cost per entry from cells' usage.json: unknown stays unknown, never 0."""

from __future__ import annotations

import json

import pandas as pd

from ptb_harness.results.token_usage import (
    TOKEN_USAGE_COLUMNS,
    USAGE_DISAGREEMENT,
    USAGE_SOURCE,
    cell_token_usage,
    format_usd,
    gateway_cost_by_entry,
    gateway_cost_text,
    token_usage_by_entry,
    token_usage_markdown,
    typed_token_usage,
)


def test_cell_usage_reads_numbers_and_keeps_unknown_as_none(tmp_path):
    (tmp_path / "usage.json").write_text(
        json.dumps({"input_tokens": 10, "output_tokens": None, "cost_usd": 0.5, "turns": True, "tool_calls": "3"})
    )
    got = cell_token_usage(tmp_path)
    assert got["input_tokens"] == 10 and got["cost_usd"] == 0.5
    assert got["output_tokens"] is None and got["turns"] is None and got["tool_calls"] is None
    columns = (*TOKEN_USAGE_COLUMNS, USAGE_SOURCE, USAGE_DISAGREEMENT)
    assert cell_token_usage(tmp_path / "missing") == dict.fromkeys(columns)
    assert got[USAGE_SOURCE] is None  # no source stated: the trace's, from before the gateway
    for source, read in (("gateway", "gateway"), ("trace", "trace"), ("forged", None), (["gateway"], None)):
        (tmp_path / "usage.json").write_text(json.dumps({"source": source}))
        assert cell_token_usage(tmp_path)[USAGE_SOURCE] == read


def test_means_and_totals_are_over_the_cells_that_state_them():
    rows = [
        {"agent": "claude", "input_tokens": 1000, "output_tokens": 10, "cost_usd": 0.25},
        {"agent": "claude", "input_tokens": 3000, "output_tokens": 30, "cost_usd": None},
        {"agent": "codex", "input_tokens": None, "output_tokens": None, "cost_usd": None},
    ]
    table = typed_token_usage(pd.DataFrame([{**dict.fromkeys(TOKEN_USAGE_COLUMNS), **r} for r in rows]))
    by = token_usage_by_entry(table).set_index("agent")
    assert by.loc["claude", "input_tokens_mean"] == 2000 and by.loc["claude", "input_tokens_total"] == 4000
    assert by.loc["claude", "cost_usd_total"] == 0.25 and by.loc["claude", "cost_usd_cells"] == 1
    assert by.loc["codex", "input_tokens_total"] is None or pd.isna(by.loc["codex", "input_tokens_total"])
    text = "\n".join(token_usage_markdown(table))
    assert "| claude | 2,000 | 20 | $0.25 | 4,000 | 40 | $0.25 | 2 / 1 of 2 |" in text
    assert "| codex | unknown | unknown | unknown | unknown | unknown | unknown | 0 / 0 of 1 |" in text


def test_the_gateway_cost_per_entry_is_over_metered_cells_and_unknown_is_never_0():
    rows = [
        ("claude", "gateway", 0.25), ("claude", "gateway", 0.75), ("claude", None, None),  # one not run yet
        ("codex", "gateway", 0.5), ("codex", "gateway", None),  # a model without a price
        ("opencode", "trace", 1.5),  # its trace's own cost: not the gateway's
        ("noop", None, None),
    ]  # fmt: skip
    table = pd.DataFrame([{"entry": e, USAGE_SOURCE: s, "cost_usd": c} for e, s, c in rows])
    costs = gateway_cost_by_entry(table)
    got = {e: gateway_cost_text(r.llm_cost_usd, r.llm_cost_cells, r.llm_cells) for e, r in costs.iterrows()}
    assert got == {"claude": "$0.50", "codex": "$0.50 (1 of 2 cells)", "opencode": "unknown", "noop": "unknown"}
    assert gateway_cost_by_entry(table.assign(**{USAGE_SOURCE: "trace"})) is None  # no gateway in the campaign
    shown = [format_usd(v) for v in (0.0053, 0.25, 1234.5, 0, None)]
    assert shown == ["$0.0053", "$0.25", "$1,234.50", "$0.00", "unknown"]
