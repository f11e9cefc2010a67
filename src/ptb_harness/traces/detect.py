"""Which agent CLI wrote a trace when its agent does not declare it (agent.json
"trace_format"), decided from its content, never from the agent's name.

The first session-start event (Claude Code's, Qwen Code's or Cursor's init, Codex's
thread.started, Gemini CLI's init, OpenCode's step_start) decides: a CLI writes it before
its first model call, so before any tool the agent runs could write into its stdout, and
no number of lines written later (400 Codex lines in a Claude Code trace) changes it.
A trace without one (Codex's legacy shape, a custom agent's log) is decided by a vote:
each JSON line votes for the formats whose distinguishing keys it carries (weights: a
strong, unique marker counts more than a shared shape); the format with most votes over
many lines wins. Lines of no known format (installer output, tracebacks, other tools'
JSON) vote for nothing. Facts behind the markers: shared/notes/posttrainbench.md.

Whichever format is used, the lines it does not explain stay in the transcript as text
(parse.py): a wrong format hides nothing. An agent that declares its format
(agent.json "trace_format") is not detected at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

FORMATS = ("claude", "qwen", "codex", "codex_legacy", "gemini", "gemini_json", "opencode", "cursor", "plain")
#: The formats an agent may declare (agent.json "trace_format"), besides "auto" and "raw".
DECLARABLE = tuple(f for f in FORMATS if f != "plain")

_CLAUDE_TYPES = {"system", "assistant", "user", "result", "stream_event", "rate_limit_event"}
_GEMINI_TYPES = {"init", "message", "tool_use", "tool_result", "error", "result"}
_OPENCODE_TYPES = {"step_start", "text", "tool_use", "step_finish", "error"}
_CODEX_PREFIXES = ("thread.", "turn.", "item.")


def _codex(obj: dict[str, Any], t: Any) -> dict[str, int]:
    # Codex exec --json: dotted event types; legacy: {"id", "msg": {"type"}}
    v = {"codex": 3} if isinstance(t, str) and t.startswith(_CODEX_PREFIXES) else {}
    msg = obj.get("msg")
    if "id" in obj and isinstance(msg, dict) and "type" in msg:
        v["codex_legacy"] = 3
    elif t is None and ("prompt" in obj or {"model", "provider"} <= set(obj)) and len(obj) <= 8:
        v["codex_legacy"] = 1  # its leading config and prompt lines
    return v


def _cursor(obj: dict[str, Any], t: Any) -> dict[str, int]:
    # its own event types and keys; its init has apiKeySource but no tools
    if t == "system" and "apiKeySource" in obj and "tools" not in obj:
        return {"cursor": 5}
    if t in ("thinking", "tool_call") or "call_id" in obj or "timestamp_ms" in obj:
        return {"cursor": 3}
    return {}


def _opencode(obj: dict[str, Any], t: Any) -> dict[str, int]:
    # sessionID and a nested part, integer epoch-ms timestamps
    if "sessionID" in obj and isinstance(obj.get("part"), dict):
        return {"opencode": 3}
    stamp = obj.get("timestamp")
    if t in _OPENCODE_TYPES and isinstance(stamp, int) and not isinstance(stamp, bool):
        return {"opencode": 2}
    return {}


def _gemini(obj: dict[str, Any], t: Any) -> dict[str, int]:
    # stream-json: ISO timestamp on every event, flat tool fields; --output-format json:
    # one object with `response` and `stats`
    v = {}
    if t in _GEMINI_TYPES and isinstance(obj.get("timestamp"), str):
        v["gemini"] = 3 if t == "tool_use" and "tool_name" in obj else 2
    if "response" in obj and "stats" in obj:
        v["gemini_json"] = 5
    return v


def _claude(obj: dict[str, Any], t: Any) -> dict[str, int]:
    """Claude Code stream-json (asked only when no Cursor or Gemini marker matched:
    Cursor's assistant/user events look alike)."""
    if t not in _CLAUDE_TYPES:
        return {}
    message = obj.get("message")
    if t == "system" and obj.get("subtype") == "init" and ("claude_code_version" in obj or "tools" in obj):
        return {"claude": 5}
    if isinstance(message, dict) and isinstance(message.get("content"), list):
        # Claude Code marks its messages; a bare {type, message} is Cursor-like: no vote
        marked = "parent_tool_use_id" in obj or str(message.get("id", "")).startswith("msg_")
        return {"claude": 2} if marked else {}
    if t == "result" and ("total_cost_usd" in obj or "num_turns" in obj):
        return {"claude": 3}
    return {"claude": 2} if t in ("stream_event", "rate_limit_event") else {}


def _qwen_marker(obj: dict[str, Any], t: Any) -> int:
    """Qwen Code stream-json is Claude Code's shapes; its own marks: its version in the
    init event, token totals (total_tokens) in assistant usage and in a result that
    states no cost."""
    if t == "system" and "qwen_code_version" in obj:
        return 10
    if t == "assistant" and isinstance(obj.get("message"), dict):
        usage = obj["message"].get("usage")
    elif t == "result" and "total_cost_usd" not in obj:
        usage = obj.get("usage")
    else:
        return 0
    return 3 if isinstance(usage, dict) and "total_tokens" in usage else 0


def _claude_marker(obj: dict[str, Any], t: Any) -> bool:
    """Claude Code's own marks: its version, Anthropic message ids, the stated cost."""
    message = obj.get("message")
    return (
        "claude_code_version" in obj
        or (isinstance(message, dict) and str(message.get("id", "")).startswith("msg_"))
        or "total_cost_usd" in obj
        or t == "rate_limit_event"
    )


def _claude_or_qwen(obj: dict[str, Any], t: Any) -> dict[str, int]:
    qwen = _qwen_marker(obj, t)
    if qwen:
        return {"qwen": qwen}
    v = _claude(obj, t)
    if v and not _claude_marker(obj, t):
        v["qwen"] = 1  # a shape both write: Qwen Code's too (less, so Claude wins a tie)
    return v


def votes(obj: dict[str, Any]) -> dict[str, int]:
    """The votes of one decoded JSON line."""
    t = obj.get("type")
    v = {**_codex(obj, t), **_cursor(obj, t), **_opencode(obj, t), **_gemini(obj, t)}
    if "cursor" not in v and "gemini" not in v:
        v.update(_claude_or_qwen(obj, t))
    return v


def explains(fmt: str, obj: dict[str, Any], types: frozenset[str]) -> bool:
    """Whether a line of a trace detected as fmt is one of its events (else: foreign)."""
    v = votes(obj)
    return fmt in v if v else obj.get("type") in types


def session_start(obj: dict[str, Any]) -> str | None:
    """The format whose session-start event obj is (a CLI's first line), or None."""
    t = obj.get("type")
    if t == "thread.started":
        return "codex"
    if t == "init" and isinstance(obj.get("timestamp"), str):
        return "gemini"
    if t == "step_start" and "sessionID" in obj:
        return "opencode"
    if t == "system" and (obj.get("subtype") == "init" or "apiKeySource" in obj):
        v = votes(obj)  # Claude Code's, Qwen Code's or Cursor's init: its strongest vote
        return max(v, key=v.__getitem__) if v else None
    return None


def first_session_start(objects: Iterable[dict[str, Any]]) -> str | None:
    """The format of the first session-start event among the decoded JSON lines, or None."""
    return next((fmt for fmt in map(session_start, objects) if fmt is not None), None)


def detect(objects: Iterable[dict[str, Any]]) -> tuple[str, Counter]:
    """(format, vote totals) over the decoded JSON lines given; 'plain' when none vote."""
    total: Counter = Counter()
    for obj in objects:
        total.update(votes(obj))
    if not total:
        return "plain", total
    return total.most_common(1)[0][0], total


#: Fewer events of the vote's winner than this, among more lines of other kinds, are
#: stray lines, not a session of that format (an aider log with one Claude-like line).
#: A count, not a share: lines added to a real session cannot push it below.
MIN_EVENTS = 3


def too_few_events(explained: int, other: int) -> bool:
    """Whether a format won by vote has too few events to call the trace that format's:
    the caller then keeps the trace as plain text (verbatim), which loses nothing."""
    return explained < MIN_EVENTS and other > explained
