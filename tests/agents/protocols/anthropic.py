"""Anthropic Messages API (``POST /v1/messages``, SSE streaming with tool_use blocks), as
Claude Code speaks it. Part of the scripted model server, a test stand-in.

The event sequence is the one the real API sends and Claude Code accepts: message_start,
per block content_block_start / content_block_delta / content_block_stop, message_delta
(stop_reason, usage), message_stop.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from scripted_server import SIDE_ANSWER, SSE_HEADERS, ZERO_USAGE, Plan, Request, Response, json_response, sse, usage_of

_ids = itertools.count(1)


def matches(method: str, path: str) -> bool:
    return method == "POST" and path.rstrip("/").endswith("/v1/messages")


def count_model_turns(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant")


def shell_tool(body: dict[str, Any]) -> str:
    """The name of the CLI's shell tool (Claude Code: Bash)."""
    names = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
    return "Bash" if "Bash" in names or not names else next((n for n in names if "bash" in str(n).lower()), "Bash")


def _usage(u: dict[str, int]) -> dict[str, int]:
    return {
        "input_tokens": u["input_tokens"] - u["cached_tokens"],
        "cache_read_input_tokens": u["cached_tokens"],
        "cache_creation_input_tokens": 0,
        "output_tokens": u["output_tokens"],
    }


def respond(request: Request, plan: Plan) -> Response:
    body = request.json()
    if not isinstance(body, dict):
        return json_response({"type": "error", "error": {"type": "invalid_request_error", "message": "no JSON"}}, 400)
    model = body.get("model") or plan.model
    if plan.is_main_model(model):
        step = plan.step_for(count_model_turns(body))
        usage = usage_of(step)
        plan.record_usage(usage)
    else:
        step, usage = {"text": SIDE_ANSWER}, dict(ZERO_USAGE)
    n = next(_ids)
    if "shell" in step:
        block = {"type": "tool_use", "id": f"toolu_standin{n:04d}", "name": shell_tool(body), "input": {}}
        delta = {"type": "input_json_delta", "partial_json": _json({"command": step["shell"]})}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": step["text"]}
        stop = "end_turn"
    message = {
        "id": f"msg_standin{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**_usage(usage), "output_tokens": 0},
    }
    if not body.get("stream"):
        full = {"input": {"command": step["shell"]}} if "shell" in step else {"text": step["text"]}
        content = [{**block, **full}]
        return json_response({**message, "content": content, "stop_reason": stop, "usage": _usage(usage)})

    def events() -> Iterator[bytes]:
        yield sse("message_start", {"type": "message_start", "message": message})
        yield sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})
        yield sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        yield sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield sse(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": _usage(usage)},
        )
        yield sse("message_stop", {"type": "message_stop"})

    return Response(200, dict(SSE_HEADERS), events())


def _json(obj: Any) -> str:
    return json.dumps(obj)
