"""OpenAI Chat Completions (``POST .../chat/completions``, SSE streaming with tool_calls),
as Qwen Code and OpenCode's OpenAI-compatible provider speak it. Part of the scripted
model server, a test stand-in.

A streamed answer is the chunk sequence the real API sends: a first chunk with the role
and either one ``tool_calls`` entry (the CLI's shell tool, arguments as one JSON string)
or the text, a chunk with ``finish_reason`` (``tool_calls`` / ``stop``), a chunk with
empty ``choices`` and ``usage`` (``prompt_tokens`` includes
``prompt_tokens_details.cached_tokens``, as the real API counts), then ``data: [DONE]``.
The usage chunk is sent whether or not the request asked for it
(``stream_options.include_usage``): clients that did not ask ignore it.

A request that offers no tools is a side call (OpenCode titles its session with the
main model when no small model is set): a short plain answer, zero usage, no plan step.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

from scripted_server import SIDE_ANSWER, SSE_HEADERS, ZERO_USAGE, Plan, Request, Response, json_response, sse, usage_of

#: Shell tool names of the CLIs that speak this protocol, most specific first.
SHELL_TOOLS = ("run_shell_command", "bash", "shell", "Bash")

_ids = itertools.count(1)


def matches(method: str, path: str) -> bool:
    return method == "POST" and path.rstrip("/").endswith("/chat/completions")


def count_model_turns(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant")


def _functions(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for tool in body.get("tools") or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out[fn["name"]] = fn
    return out


def shell_call(body: dict[str, Any], command: str) -> tuple[str, dict[str, Any]]:
    """(tool name, arguments) calling the CLI's shell tool with command.

    Other required string parameters of that tool (OpenCode's bash wants a
    ``description``) get a fixed placeholder, so the CLI's argument check passes.
    """
    functions = _functions(body)
    name = next((n for n in SHELL_TOOLS if n in functions), None)
    if name is None:
        name = next((n for n in functions if "shell" in n.lower() or "bash" in n.lower()), SHELL_TOOLS[0])
    schema = (functions.get(name) or {}).get("parameters") or {}
    props = schema.get("properties") or {}
    args: dict[str, Any] = {"command": command}
    for key in schema.get("required") or []:
        if key not in args and (props.get(key) or {}).get("type") == "string":
            args[key] = "scripted step"
    return name, args


def usage_fields(u: dict[str, int]) -> dict[str, Any]:
    return {
        "prompt_tokens": u["input_tokens"],
        "completion_tokens": u["output_tokens"],
        "total_tokens": u["input_tokens"] + u["output_tokens"],
        "prompt_tokens_details": {"cached_tokens": u["cached_tokens"]},
    }


def respond(request: Request, plan: Plan) -> Response:
    body = request.json()
    if not isinstance(body, dict):
        return json_response({"error": {"message": "stand-in: no JSON body", "type": "invalid_request_error"}}, 400)
    model = body.get("model") or plan.model
    if plan.is_main_model(model) and body.get("tools"):
        step = plan.step_for(count_model_turns(body))
        usage = usage_of(step)
        plan.record_usage(usage)
    else:
        step, usage = {"text": SIDE_ANSWER}, dict(ZERO_USAGE)
    n = next(_ids)
    head = {"id": f"chatcmpl-standin{n:04d}", "created": int(time.time()), "model": model}
    if "shell" in step:
        name, args = shell_call(body, step["shell"])
        call = {
            "id": f"call_standin{n:04d}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": step["text"]}
        finish = "stop"
    if not body.get("stream"):
        return json_response(
            {
                **head,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage_fields(usage),
            }
        )
    delta = dict(message)
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": 0, **c} for c in delta["tool_calls"]]

    def chunks() -> Iterator[bytes]:
        chunk = {**head, "object": "chat.completion.chunk"}
        yield sse(None, {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        yield sse(None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        yield sse(None, {**chunk, "choices": [], "usage": usage_fields(usage)})
        yield b"data: [DONE]\n\n"

    return Response(200, dict(SSE_HEADERS), chunks())
