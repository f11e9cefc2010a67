"""Traces the real CLIs wrote in tests/agents/test_real_agents.py (sanitized copies, saved
with PTB_SAVE_TRACES=1): format detected by content, usage.json exact, resumes counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptb_harness.traces import parse_trace_file

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# what the scripted server sent in those runs (test_real_agents.py's plans)
SCORED = {"input_tokens": 2700, "output_tokens": 49, "cached_tokens": 1300, "tool_calls": 1, "resumes": 0}
REPROMPT = {"input_tokens": 4800, "output_tokens": 61, "cached_tokens": 1200, "tool_calls": 2, "resumes": 1}


@pytest.mark.parametrize(
    ("fixture", "fmt", "expected"),
    [
        ("claude_scored.txt", "claude", {**SCORED, "turns": 2}),
        ("claude_reprompt.txt", "claude", {**REPROMPT, "turns": 4}),
        ("codex_scored.txt", "codex", {**SCORED, "turns": 1}),
        ("codex_reprompt.txt", "codex", {**REPROMPT, "turns": 2}),
        ("gemini_scored.txt", "gemini", {**SCORED, "turns": 2}),
        ("gemini_reprompt.txt", "gemini", {**REPROMPT, "turns": 4}),
        ("qwen_scored.txt", "qwen", {**SCORED, "turns": 2}),
        ("qwen_reprompt.txt", "qwen", {**REPROMPT, "turns": 4}),
        ("opencode_scored.txt", "opencode", {**SCORED, "turns": 2}),
        ("opencode_reprompt.txt", "opencode", {**REPROMPT, "turns": 4}),
    ],
)
def test_real_trace_detected_and_its_usage_exact(tmp_path, fixture, fmt, expected):
    stats = parse_trace_file(FIXTURES / fixture, tmp_path / "parsed.txt")
    assert stats.format == fmt
    assert {k: stats.usage[k] for k in expected} == expected
    # Claude states a cost; OpenCode too, its config having the model's prices (3 and 15 USD/M)
    assert (stats.usage["cost_usd"] is not None) == (fmt in ("claude", "opencode"))
    if fmt == "opencode":
        uncached = expected["input_tokens"] - expected["cached_tokens"]
        assert stats.usage["cost_usd"] == pytest.approx((uncached * 3 + expected["output_tokens"] * 15) / 1e6)
    transcript = (tmp_path / "parsed.txt").read_text()
    assert "TOOL CALL" in transcript and "TOOL RESULT" in transcript
