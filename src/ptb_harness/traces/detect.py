"""Which agent CLI wrote a trace, decided from its content, never from the agent's name.

Each JSON line votes for the formats whose distinguishing keys it carries (weights: a
strong, unique marker counts more than a shared shape); the format with most votes over
many lines wins. Lines of no known format (installer output, tracebacks, other tools'
JSON) vote for nothing. Facts behind the markers: shared/notes/posttrainbench.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

FORMATS = ("claude", "codex", "codex_legacy", "gemini", "gemini_json", "opencode", "cursor", "plain")

_CLAUDE_TYPES = {"system", "assistant", "user", "result", "stream_event", "rate_limit_event"}
_GEMINI_TYPES = {"init", "message", "tool_use", "tool_result", "error", "result"}
_OPENCODE_TYPES = {"step_start", "text", "tool_use", "step_finish", "error"}
_CODEX_PREFIXES = ("thread.", "turn.", "item.")


def votes(obj: dict[str, Any]) -> dict[str, int]:
    """The votes of one decoded JSON line."""
    v: dict[str, int] = {}
    t = obj.get("type")
    # Codex exec --json: dotted event types; legacy: {"id", "msg": {"type"}}
    if isinstance(t, str) and t.startswith(_CODEX_PREFIXES):
        v["codex"] = 3
    msg = obj.get("msg")
    if "id" in obj and isinstance(msg, dict) and "type" in msg:
        v["codex_legacy"] = 3
    elif t is None and ("prompt" in obj or {"model", "provider"} <= set(obj)) and len(obj) <= 8:
        v["codex_legacy"] = 1  # its leading config and prompt lines
    # Cursor: its own event types and keys; its init has apiKeySource but no tools
    if t in ("thinking", "tool_call") or "call_id" in obj or "timestamp_ms" in obj:
        v["cursor"] = 3
    if t == "system" and "apiKeySource" in obj and "tools" not in obj:
        v["cursor"] = 5
    # OpenCode: sessionID and a nested part, integer epoch-ms timestamps
    part = obj.get("part")
    if "sessionID" in obj and isinstance(part, dict):
        v["opencode"] = 3
    elif t in _OPENCODE_TYPES and isinstance(obj.get("timestamp"), int) and not isinstance(obj.get("timestamp"), bool):
        v["opencode"] = 2
    # Gemini CLI stream-json: ISO timestamp on every event, flat tool fields
    if t in _GEMINI_TYPES and isinstance(obj.get("timestamp"), str):
        v["gemini"] = 2
        if t == "tool_use" and "tool_name" in obj:
            v["gemini"] = 3
    # Claude Code stream-json (Cursor's assistant/user events look alike: no vote then)
    if t in _CLAUDE_TYPES and "cursor" not in v and "gemini" not in v:
        message = obj.get("message")
        if t == "system" and obj.get("subtype") == "init" and ("claude_code_version" in obj or "tools" in obj):
            v["claude"] = 5
        elif isinstance(message, dict) and isinstance(message.get("content"), list):
            # Claude Code marks its messages; a bare {type, message} is Cursor-like: no vote
            if "parent_tool_use_id" in obj or str(message.get("id", "")).startswith("msg_"):
                v["claude"] = 2
        elif t == "result" and ("total_cost_usd" in obj or "num_turns" in obj):
            v["claude"] = 3
        elif t in ("stream_event", "rate_limit_event"):
            v["claude"] = 2
    if "response" in obj and "stats" in obj:
        v["gemini_json"] = 5
    return v


def detect(objects: Iterable[dict[str, Any]]) -> tuple[str, Counter]:
    """(format, vote totals) over the decoded JSON lines given; 'plain' when none vote."""
    total: Counter = Counter()
    for obj in objects:
        total.update(votes(obj))
    if not total:
        return "plain", total
    (best, n), *rest = total.most_common()
    return best, total
