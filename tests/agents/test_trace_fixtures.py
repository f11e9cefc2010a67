"""Traces the real CLIs wrote in tests/agents/test_real_agents.py (sanitized copies, saved
with PTB_SAVE_TRACES=1): read in the format each shipped agent declares (agent.json) and
as detected from the content, alike; usage.json exact, resumes counted; a session stopped
at the LLM budget (a tool forging usage lines into the CLI's stdout, Gemini CLI printing a
stack trace per refused call) keeps its events and its own format's reported usage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_real_agents import FORGED

from ptb_harness.campaign.agents import load_agent
from ptb_harness.traces import parse_trace_file

FIXTURES = Path(__file__).resolve().parent / "fixtures"
AGENTS = Path(__file__).resolve().parents[2] / "agents"

# what the scripted server sent in those runs (test_real_agents.py's plans)
SCORED = {"input_tokens": 2700, "output_tokens": 49, "cached_tokens": 1300, "tool_calls": 1, "resumes": 0}
REPROMPT = {"input_tokens": 4800, "output_tokens": 61, "cached_tokens": 1200, "tool_calls": 2, "resumes": 1}


def declared_format(name: str, how: str) -> str | None:
    """The format the parse is told: the shipped agent's agent.json's, or none (detected)."""
    if how == "detected":
        return None
    declared = load_agent(AGENTS / name).trace_format
    assert declared == name
    return declared


@pytest.mark.parametrize("how", ["declared", "detected"])
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
def test_real_trace_detected_and_its_usage_exact(tmp_path, fixture, fmt, expected, how):
    stats = parse_trace_file(FIXTURES / fixture, tmp_path / "parsed.txt", declared=declared_format(fmt, how))
    assert stats.format == fmt
    assert {k: stats.usage[k] for k in expected} == expected
    # Claude states a cost; OpenCode too, its config having the model's prices (3 and 15 USD/M)
    assert (stats.usage["cost_usd"] is not None) == (fmt in ("claude", "opencode"))
    if fmt == "opencode":
        uncached = expected["input_tokens"] - expected["cached_tokens"]
        assert stats.usage["cost_usd"] == pytest.approx((uncached * 3 + expected["output_tokens"] * 15) / 1e6)
    transcript = (tmp_path / "parsed.txt").read_text()
    assert "TOOL CALL" in transcript and "TOOL RESULT" in transcript


#: test_the_llm_budget_stops_the_session_and_forged_usage_changes_nothing's runs: the
#: input tokens each CLI reported itself before the harness stopped it (Claude Code and
#: OpenCode state the two answers' 2,700; the others had not yet), and how many of the
#: six forged lines are of its own format (its events: the forged 5,000,000 counted, as
#: usage.json's agent_reported shows beside the gateway's figures)
BUDGET = {"claude": (2700, 2), "codex": (0, 1), "gemini": (0, 1), "opencode": (2700, 1), "qwen": (0, 1)}


@pytest.mark.parametrize("how", ["declared", "detected"])
@pytest.mark.parametrize("name", sorted(BUDGET))
def test_a_session_stopped_at_the_llm_budget_keeps_its_events_and_reported_usage(tmp_path, name, how):
    """Both tool calls and their results rendered as events; every forged line of another
    format kept as text, in its place; the reported usage read (the forged event of its
    own format counted, the negative one refused). Gemini CLI's 13 lines of stack trace
    (its refused call, a 429) are kept as text and leave its trace Gemini CLI's: it was read
    as plain text, without events or usage, before the format was declared."""
    reported, own_forged = BUDGET[name]
    stats = parse_trace_file(
        FIXTURES / f"{name}_budget.txt", tmp_path / "parsed.txt", declared=declared_format(name, how)
    )
    lines = (tmp_path / "parsed.txt").read_text().splitlines()
    assert stats.format == name
    assert (stats.usage["input_tokens"], stats.usage["tool_calls"]) == (5_000_000 + reported, 2)

    def kind(k: str) -> list[str]:
        return [m.group(1) for line in lines if (m := re.match(rf"\[[^]]*\] {k}(.*)", line))]

    assert (len(kind("TOOL CALL ")), len(kind("TOOL RESULT "))) == (2, 2)
    kept = [text.removeprefix(": ") for text in kind("TEXT")]
    assert len([line for line in FORGED if line in kept]) == len(FORGED) - own_forged
    if name == "gemini":  # the forged lines in their place: the forging tool's call, they, its result
        calls, results = (
            [i for i, line in enumerate(lines) if f"] {k} " in line] for k in ("TOOL CALL", "TOOL RESULT")
        )
        assert calls[1] < lines.index(next(line for line in lines if line.endswith(FORGED[3]))) < results[1]
        stack = [line for line in kept if line.startswith("    at ")]
        assert len(stack) == 10 and kept[-2:] == ["  status: 429", "}"]
        assert any(line.startswith("Attempt 1 failed with status 429.") for line in kept)
        assert (stats.rendered_events, stats.noise_lines, stats.foreign_json_lines) == (7, 17, 5)
