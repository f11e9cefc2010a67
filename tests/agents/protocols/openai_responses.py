"""OpenAI Responses API (``POST /v1/responses``, SSE), as Codex speaks it. Part of the
scripted model server, a test stand-in.

A shell step becomes a ``function_call`` item for the CLI's own shell tool, whichever
of its shapes the request offers (``shell_command`` {command: str}, ``exec_command``
{cmd: str}, ``shell`` {command: [argv]}); a text step an assistant ``message`` item.
Usage goes in ``response.completed`` (input_tokens include the cached ones).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from scripted_server import SIDE_ANSWER, SSE_HEADERS, ZERO_USAGE, Plan, Request, Response, json_response, sse, usage_of

_ids = itertools.count(1)


def matches(method: str, path: str) -> bool:
    return method == "POST" and path.rstrip("/").endswith("/responses")


def count_model_turns(body: dict[str, Any]) -> int:
    items = body.get("input") if isinstance(body.get("input"), list) else []
    return sum(
        1
        for it in items
        if isinstance(it, dict)
        and (
            it.get("type") in ("function_call", "local_shell_call", "custom_tool_call") or it.get("role") == "assistant"
        )
    )


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [str(t.get("name") or t.get("type")) for t in body.get("tools") or [] if isinstance(t, dict)]


def _parameters(body: dict[str, Any], name: str) -> set[str]:
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and (tool.get("name") or tool.get("type")) == name:
            return set(((tool.get("parameters") or {}).get("properties") or {}).keys())
    return set()


def shell_call(body: dict[str, Any], command: str) -> tuple[str, str]:
    """(tool name, JSON arguments) for the CLI's shell tool. A long command gets a long
    wait, as a real model asks for one (by default Codex hands a command still running
    back to the model after 10 s), so the harness's budget is what ends it."""
    names = _tool_names(body)
    if "shell_command" in names:
        name, args = "shell_command", {"command": command}
    elif "exec_command" in names:
        name, args = "exec_command", {"cmd": command}
    else:
        name, args = "shell", {"command": ["bash", "-lc", command]}
    params = _parameters(body, name)
    if "timeout_ms" in params:
        args["timeout_ms"] = 3_600_000
    if "yield_time_ms" in params:  # exec_command hands a running command back after this
        args["yield_time_ms"] = 3_600_000
    return name, json.dumps(args)


def _usage(u: dict[str, int]) -> dict[str, Any]:
    return {
        "input_tokens": u["input_tokens"],
        "input_tokens_details": {"cached_tokens": u["cached_tokens"]},
        "output_tokens": u["output_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u["input_tokens"] + u["output_tokens"],
    }


def respond(request: Request, plan: Plan) -> Response:
    body = request.json()
    if not isinstance(body, dict):
        return json_response({"error": {"message": "stand-in: no JSON body"}}, 400)
    model = body.get("model") or plan.model
    if plan.is_main_model(model):
        step = plan.step_for(count_model_turns(body))
        usage = usage_of(step)
        plan.record_usage(usage)
    else:
        step, usage = {"text": SIDE_ANSWER}, dict(ZERO_USAGE)
    n = next(_ids)
    rid = f"resp_standin{n:04d}"
    if "shell" in step:
        name, arguments = shell_call(body, step["shell"])
        item = {"type": "function_call", "id": f"fc_standin{n:04d}", "call_id": f"call_standin{n:04d}",
                "name": name, "arguments": arguments, "status": "completed"}  # fmt: skip
    else:
        item = {"type": "message", "id": f"msg_standin{n:04d}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": step["text"], "annotations": []}]}  # fmt: skip
    response = {"id": rid, "object": "response", "model": model, "status": "completed", "output": [item]}
    if not body.get("stream"):
        return json_response({**response, "usage": _usage(usage)})

    def events() -> Iterator[bytes]:
        yield sse(
            "response.created",
            {"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
        )
        yield sse(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": {**item, "status": "in_progress"}},
        )
        if item["type"] == "message":
            yield sse(
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": step["text"],
                },
            )
        yield sse("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item})
        yield sse(
            "response.completed", {"type": "response.completed", "response": {**response, "usage": _usage(usage)}}
        )

    return Response(200, dict(SSE_HEADERS), events())
