"""usage.json from the traces of Gemini CLI, Qwen Code and OpenCode: the rules each
CLI's token counts follow (what is cached, what a resume restates), on small synthetic
traces in their shapes. The real traces are in tests/agents/fixtures."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ptb_harness.core.cell_files import USAGE_QUANTITIES, UsageRecord
from ptb_harness.results.token_usage import TOKEN_USAGE_COLUMNS
from ptb_harness.traces import parse_trace_file
from ptb_harness.traces.token_usage import TokenUsage


def usage_of(tmp_path: Path, events: list[dict]) -> tuple[str, dict]:
    raw = tmp_path / "solve_out.txt"
    raw.write_text("".join(json.dumps(e) + "\n" for e in events))
    stats = parse_trace_file(raw, tmp_path / "parsed.txt")
    return stats.format, stats.usage


def oc(kind: str, session: str = "ses_1", **part) -> dict:
    return {"type": kind, "timestamp": 1796136000000, "sessionID": session, "part": {"sessionID": session, **part}}


def oc_tool(call: str) -> dict:
    state = {"status": "completed", "input": {"command": "ls"}, "output": "x"}
    return oc("tool_use", type="tool", tool="bash", callID=call, state=state)


def test_opencode_adds_cache_to_input_reasoning_to_output_and_counts_runs(tmp_path):
    tokens = {"input": 100, "output": 10, "reasoning": 5, "cache": {"read": 40, "write": 7}}
    events = [
        oc("step_start"),
        oc_tool("c1"),
        oc_tool("c2"),
        oc("step_finish", reason="tool-calls", tokens=tokens, cost=0.01),
        oc("step_start"),
        oc("text", text="done"),
        oc("step_finish", reason="stop", tokens=tokens, cost=0.02),
        # a resumed run (opencode run --continue keeps the session id)
        oc("step_start"),
        oc("step_finish", reason="stop", tokens=tokens, cost=0.03),
    ]
    fmt, usage = usage_of(tmp_path, events)
    assert fmt == "opencode"
    assert usage["input_tokens"] == 3 * (100 + 40 + 7) and usage["cached_tokens"] == 3 * 40
    assert usage["output_tokens"] == 3 * (10 + 5)
    assert usage["cost_usd"] == pytest.approx(0.06)
    assert (usage["turns"], usage["tool_calls"], usage["resumes"]) == (3, 2, 1)


def test_opencode_stopped_inside_its_first_step_knows_no_tokens(tmp_path):
    _fmt, usage = usage_of(tmp_path, [oc("step_start"), oc("step_start")])
    assert usage["input_tokens"] is None and usage["cost_usd"] is None and usage["turns"] == 2


def gm(kind: str, **fields) -> dict:
    return {"type": kind, "timestamp": "2026-12-01T10:00:00.000Z", **fields}


def test_gemini_turns_are_model_responses_and_each_session_states_its_own_tokens(tmp_path):
    stats = {"input_tokens": 1000, "output_tokens": 20, "cached": 600, "input": 400, "tool_calls": 2}
    call = {"tool_name": "run_shell_command", "parameters": {"command": "ls"}}
    events = [
        gm("init", session_id="s", model="m"),
        gm("message", role="user", content="go"),
        # one model response with two parallel tool calls, then their results
        gm("tool_use", tool_id="t1", **call),
        gm("tool_use", tool_id="t2", **call),
        gm("tool_result", tool_id="t1", status="success", output="a"),
        gm("tool_result", tool_id="t2", status="success", output="b"),
        gm("message", role="assistant", content="Do", delta=True),
        gm("message", role="assistant", content="ne.", delta=True),
        gm("result", status="success", stats=stats),
        # gemini --resume latest: a new init, the session's new tokens only
        gm("init", session_id="s", model="m"),
        gm("message", role="user", content="more time"),
        gm("message", role="assistant", content="Still done.", delta=True),
        gm("result", status="success", stats={**stats, "tool_calls": 0}),
    ]
    fmt, usage = usage_of(tmp_path, events)
    assert fmt == "gemini"
    assert (usage["input_tokens"], usage["output_tokens"], usage["cached_tokens"]) == (2000, 40, 1200)
    assert (usage["turns"], usage["tool_calls"], usage["resumes"]) == (3, 2, 1)
    assert "ASSISTANT: Done." in (tmp_path / "parsed.txt").read_text()


def qw_result(session: str, inp: int, out: int, cached: int, turns: int = 2) -> dict:
    usage = {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": cached, "total_tokens": inp + out}
    return {"type": "result", "subtype": "success", "session_id": session, "num_turns": turns, "usage": usage}


def qw_init(session: str) -> dict:
    return {
        "type": "system",
        "subtype": "init",
        "session_id": session,
        "tools": ["run_shell_command"],
        "qwen_code_version": "0.24.4",
    }


def test_qwen_counts_a_resumed_sessions_restated_tokens_once_and_other_sessions_in_full(tmp_path):
    events = [
        qw_init("a"),
        qw_result("a", 2100, 35, 300),
        qw_init("a"),  # qwen --continue: same session, its result restates the first run's
        qw_result("a", 4800, 61, 1200),
        qw_init("b"),  # another session: all its own
        qw_result("b", 500, 5, 0, turns=1),
    ]
    fmt, usage = usage_of(tmp_path, events)
    assert fmt == "qwen"
    assert (usage["input_tokens"], usage["output_tokens"], usage["cached_tokens"]) == (5300, 66, 1200)
    assert (usage["turns"], usage["resumes"], usage["cost_usd"]) == (5, 2, None)


def test_lines_both_claude_code_and_qwen_code_write_are_claudes_without_a_qwen_mark(tmp_path):
    tool_result = {"type": "tool_result", "tool_use_id": "c1", "content": "ok"}
    shared = {"type": "user", "parent_tool_use_id": None, "message": {"role": "user", "content": [tool_result]}}
    result = {"type": "result", "subtype": "success", "num_turns": 1}
    fmt, _usage = usage_of(tmp_path, [shared, shared, result])
    assert fmt == "claude"
    fmt, _usage = usage_of(tmp_path, [qw_init("a"), shared, shared, result])
    assert fmt == "qwen"


@pytest.mark.parametrize(
    ("field", "value", "counted"),
    [
        ("input_tokens", 1000, 1000),
        ("input_tokens", 0, 0),
        ("input_tokens", -4_999_000, None),  # a forged negative event would cancel real usage
        ("input_tokens", 10**10 + 1, None),  # absurd for one event
        ("input_tokens", float("nan"), None),
        ("input_tokens", float("inf"), None),
        ("input_tokens", True, None),
        ("input_tokens", "5000", None),
        ("cost_usd", 42.5, 42.5),
        ("cost_usd", -41.5, None),
        ("cost_usd", 10_000.01, None),
    ],
)
def test_trace_usage_refuses_negative_and_absurd_numbers(field, value, counted):
    """What one trace event may add (a tool writing into the CLI's stdout forges events):
    a number from 0 to 10**10 tokens, or to $10,000; anything else adds nothing."""
    usage = TokenUsage()
    usage.add(field, value)
    assert usage.record("claude")[field] == counted


def test_usage_json_s_quantities_are_listed_once():
    """USAGE_QUANTITIES opens UsageRecord's fields (usage.json), is cells.csv's usage
    columns and the keys of what a trace's tally records (with the format after them)."""
    fields = [f.name for f in dataclasses.fields(UsageRecord) if f.name != "extra"]  # Record's own
    assert fields[: len(USAGE_QUANTITIES)] == list(USAGE_QUANTITIES)
    assert TOKEN_USAGE_COLUMNS == USAGE_QUANTITIES
    assert list(TokenUsage().record("claude")) == [*USAGE_QUANTITIES, "format"]
    assert UsageRecord.from_dict(TokenUsage().record("claude")).format == "claude"
