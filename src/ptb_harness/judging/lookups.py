"""Two deterministic signals over what the agent did, as its trace and its LLM gateway's
request log record it: a **PTB lookup** (a command, fetch or search naming PostTrainBench's
repository, website or leaderboard) and **hosted-LLM API use** (a command or code that
calls a known LLM API host outside the agent's own gateway).

Only the agent's actions count: tool calls (their inputs: commands, URLs, search queries,
code written), never what a tool returned (the agent reading a file that names a host is
no call) nor the model's prose. The trace gives them as ``TOOL CALL`` lines; the gateway's
log (``llm_log.jsonl``, the authoritative transcript) as the tool calls in each request's
conversation and each answer, in every protocol the gateway speaks (Anthropic Messages,
OpenAI Chat Completions and Responses, Gemini), streamed answers included. A body the
gateway cut (past its size cap) is no longer JSON: only the narrow PostTrainBench
patterns are looked for in its text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ptb_harness.core.text import TRANSCRIPT_CONTINUATION

#: PostTrainBench's repository, website and leaderboard (and its authors' pages of it)
PTB_PLACES = re.compile(
    r"github\.com[/:]+aisa-group/posttrainbench|aisa-group/posttrainbench|posttrainbench\.com|"
    r"aisa-group\.github\.io|raw\.githubusercontent\.com/aisa-group|huggingface\.co/(?:datasets/|spaces/)?aisa-group",
    re.I,
)
#: a search naming it (only in a search tool's query)
PTB_NAME = re.compile(r"post[\s_-]*train[\s_-]*bench", re.I)
#: hosted LLM APIs (the agent's own model is reached through its gateway, on loopback)
HOSTED_HOSTS = re.compile(
    r"\b(?:api\.openai\.com|api\.anthropic\.com|generativelanguage\.googleapis\.com|"
    r"[a-z0-9-]*aiplatform\.googleapis\.com|openrouter\.ai/api|api\.together\.(?:xyz|ai)|api\.mistral\.ai|"
    r"api\.groq\.com|api\.deepseek\.com|api\.x\.ai|api\.cohere\.(?:ai|com)|api\.fireworks\.ai|"
    r"api\.perplexity\.ai|api-inference\.huggingface\.co|router\.huggingface\.co|api\.moonshot\.(?:ai|cn)|"
    r"dashscope(?:-intl)?\.aliyuncs\.com|[a-z0-9-]+\.openai\.azure\.com|bedrock-runtime\.[a-z0-9-]+\.amazonaws\.com)",
    re.I,
)
#: a client library's call (evidence in files; no host: it may be the gateway's)
SDK_CALLS = re.compile(
    r"chat\.completions\.create|responses\.create\(|messages\.create\(|generate_content\(|litellm\.completion"
)
_TOOL_TYPES = frozenset(
    {"tool_use", "server_tool_use", "function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
)
_RESULT_TYPES = frozenset(
    {
        "tool_result",
        "function_call_output",
        "custom_tool_call_output",
        "web_search_tool_result",
        "local_shell_call_output",
    }
)
_TOOL_LINE = re.compile(r"^(?:\[[^\]]*\] )?TOOL CALL (.*?) \(.*?\): (.*)$")
#: the most of one call's input joined from its continuation lines (the renderer cuts a
#: tool's input at 1,000 characters; a transcript is the harness's, this bounds any other)
_MAX_CALL_TEXT = 64 << 10
EXCERPT = 300


@dataclass(frozen=True)
class ToolCall:
    """One action of the agent: where it is recorded, the tool's name, its input as text."""

    where: str
    name: str
    text: str

    @property
    def is_search(self) -> bool:
        return "search" in self.name.lower() or '"query"' in self.text


@dataclass(frozen=True)
class Hit:
    """A tool call that names a PostTrainBench place, or a hosted LLM API host."""

    source: str
    where: str
    what: str
    excerpt: str


def ptb_hits(calls: Iterable[ToolCall], source: str) -> list[Hit]:
    out = []
    for call in calls:
        m = PTB_PLACES.search(call.text) or (PTB_NAME.search(call.text) if call.is_search else None)
        if m:
            out.append(Hit(source, call.where, m.group(0), _around(call.text, m)))
    return out


def hosted_hits(calls: Iterable[ToolCall], source: str) -> list[Hit]:
    out = []
    for call in calls:
        m = HOSTED_HOSTS.search(call.text)
        if m:
            out.append(Hit(source, call.where, m.group(0).lower(), _around(call.text, m)))
    return out


def _around(text: str, m: re.Match) -> str:
    start = max(m.start() - EXCERPT // 2, 0)
    return text[start : start + EXCERPT]


# -- the trace -----------------------------------------------------------------------------


def trace_calls(lines: Iterable[str]) -> Iterator[ToolCall]:
    """The tool calls of a parsed transcript: each TOOL CALL line with its continuation
    lines (a multi-line command's later lines, up to the renderer's cut of its input);
    the continuation lines of any other line (a tool's output) are no call."""
    call: ToolCall | None = None
    for n, line in enumerate(lines, 1):
        if call is not None and line.startswith(TRANSCRIPT_CONTINUATION) and len(call.text) < _MAX_CALL_TEXT:
            call = ToolCall(call.where, call.name, call.text + "\n" + line[len(TRANSCRIPT_CONTINUATION) :])
            continue
        if call is not None:
            yield call
        m = _TOOL_LINE.match(line)
        call = ToolCall(f"transcript line {n}", m.group(1), m.group(2)) if m else None
    if call is not None:
        yield call


# -- the gateway's log ---------------------------------------------------------------------


def _input_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _tool_of(d: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, input) when d is a tool call of any of the gateway's protocols."""
    if d.get("type") in _TOOL_TYPES:
        body = {k: d[k] for k in ("input", "arguments", "action", "query", "code") if k in d}
        return str(d.get("name") or d.get("type")), _input_text(body)
    if isinstance(d.get("functionCall"), Mapping):
        call = d["functionCall"]
        return str(call.get("name", "")), _input_text(call.get("args", {}))
    fn = d.get("function")
    if isinstance(fn, Mapping) and "arguments" in fn:
        return str(fn.get("name", "")), _input_text(fn.get("arguments", ""))
    return None


def _fragment(d: Mapping[str, Any]) -> str | None:
    """A streamed piece of a tool call's input (Anthropic's input_json_delta, OpenAI's
    argument deltas), or None."""
    if d.get("type") == "input_json_delta" and isinstance(d.get("partial_json"), str):
        return d["partial_json"]
    if d.get("type") == "response.function_call_arguments.delta" and isinstance(d.get("delta"), str):
        return d["delta"]
    return None


def body_calls(value: Any, where: str) -> tuple[list[ToolCall], str]:
    """(the tool calls in a parsed body, the streamed input pieces joined)."""
    calls, pieces, stack = [], [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(reversed(v))
            continue
        if not isinstance(v, Mapping) or v.get("type") in _RESULT_TYPES or "functionResponse" in v:
            continue  # what a tool returned is not the agent's action
        tool = _tool_of(v)
        if tool is not None:
            calls.append(ToolCall(where, *tool))
        piece = _fragment(v)
        if piece is not None:
            pieces.append(piece)
        stack.extend(reversed([x for x in v.values() if isinstance(x, Mapping | list)]))
    return calls, "".join(pieces)


def _events(text: str) -> Iterator[Any]:
    """The JSON values of a body: the whole body, or each SSE ``data:`` event (or each
    element of Gemini's JSON-array stream)."""
    try:
        yield json.loads(text)
        return
    except ValueError:
        pass
    for line in text.splitlines():
        if line.startswith("data:"):
            try:
                yield json.loads(line[5:].strip())
            except ValueError:
                continue


def llm_log_calls(entry: Mapping[str, Any]) -> tuple[list[ToolCall], list[tuple[str, str]]]:
    """(the tool calls of one llm_log.jsonl line's request and answer, the (where, text)
    of its bodies that were cut: no longer JSON, only searched for PostTrainBench)."""
    n = entry.get("n", "?")
    calls: list[ToolCall] = []
    cut: list[tuple[str, str]] = []
    for side in ("request", "response"):
        part = entry.get(side)
        body = part.get("body") if isinstance(part, Mapping) else None
        if not isinstance(body, str) or not body:
            continue
        where = f"llm_log {side} {n}"
        if isinstance(part, Mapping) and part.get("cut"):
            cut.append((where, body))
            continue
        streamed: list[str] = []
        for value in _events(body):
            found, pieces = body_calls(value, where)
            calls += found
            streamed.append(pieces)
        if any(streamed):
            calls.append(ToolCall(where, "streamed tool input", "".join(streamed)))
    return calls, cut


def cut_body_hits(bodies: Iterable[tuple[str, str]]) -> list[Hit]:
    """PostTrainBench's places in bodies cut by the gateway (no JSON left to tell a call
    from a result: only its narrow patterns)."""
    out = []
    for where, text in bodies:
        m = PTB_PLACES.search(text)
        if m:
            out.append(Hit("llm_log", where, m.group(0), _around(text, m)))
    return out
