"""Gemini API (``POST /v1beta/models/<model>:generateContent`` and
``:streamGenerateContent?alt=sse``, functionCall parts), as Gemini CLI speaks it. Part of
the scripted model server, a test stand-in.

A streamed answer is one SSE event holding a whole GenerateContentResponse: a candidate
whose content is either one ``functionCall`` part (the CLI's shell tool,
``run_shell_command``, with ``{"command": ...}``) or one text part, ``finishReason: STOP``,
and ``usageMetadata`` (promptTokenCount includes cachedContentTokenCount, as the real API
counts). Requests for another model (Gemini CLI's router and its flash-lite helpers) get
a short plain answer with zero usage. ``streamGenerateContent`` without ``alt=sse`` is,
as in the real API, a JSON array of those responses (Gemini CLI always asks for SSE).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from scripted_server import SIDE_ANSWER, SSE_HEADERS, ZERO_USAGE, Plan, Request, Response, json_response, sse, usage_of

_PATH = re.compile(r"^/(?:v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):(?P<verb>generateContent|streamGenerateContent)$")


def matches(method: str, path: str) -> bool:
    return method == "POST" and _PATH.match(path) is not None


def count_model_turns(body: dict[str, Any]) -> int:
    return sum(1 for c in body.get("contents") or [] if isinstance(c, dict) and c.get("role") == "model")


def shell_tool(body: dict[str, Any]) -> str:
    """The name of the CLI's shell tool among the declared functions (Gemini CLI: run_shell_command)."""
    names = [
        f.get("name")
        for tool in body.get("tools") or []
        if isinstance(tool, dict)
        for f in tool.get("functionDeclarations") or []
        if isinstance(f, dict)
    ]
    if "run_shell_command" in names or not names:
        return "run_shell_command"
    return next((str(n) for n in names if "shell" in str(n).lower()), "run_shell_command")


def usage_metadata(u: dict[str, int]) -> dict[str, int]:
    return {
        "promptTokenCount": u["input_tokens"],
        "candidatesTokenCount": u["output_tokens"],
        "cachedContentTokenCount": u["cached_tokens"],
        "totalTokenCount": u["input_tokens"] + u["output_tokens"],
    }


def respond(request: Request, plan: Plan) -> Response:
    m = _PATH.match(request.path.split("?", 1)[0])
    body = request.json()
    if m is None or not isinstance(body, dict):
        return json_response(
            {"error": {"code": 400, "message": "stand-in: no JSON body", "status": "INVALID_ARGUMENT"}}, 400
        )
    model = m.group("model")
    if plan.is_main_model(model):
        step = plan.step_for(count_model_turns(body))
        usage = usage_of(step)
        plan.record_usage(usage)
    else:
        step, usage = {"text": _side_answer(body)}, dict(ZERO_USAGE)
    if "shell" in step:
        part: dict[str, Any] = {"functionCall": {"name": shell_tool(body), "args": {"command": step["shell"]}}}
    else:
        part = {"text": step["text"]}
    answer = {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage_metadata(usage),
        "modelVersion": model,
        "responseId": f"standin-{len(plan.sent_usage)}",
    }
    if m.group("verb") == "generateContent":
        return json_response(answer)
    if "alt=sse" not in request.path.partition("?")[2]:  # the API's stream without SSE: a JSON array
        return json_response([answer])

    def events() -> Iterator[bytes]:
        yield sse(None, answer)

    return Response(200, dict(SSE_HEADERS), events())


def _side_answer(body: dict[str, Any]) -> str:
    """A side request asking for JSON (the router's {"reasoning", "model_choice"}) gets JSON."""
    config = body.get("generationConfig") or {}
    if config.get("responseMimeType") == "application/json":
        return '{"reasoning": "stand-in", "model_choice": "pro"}'
    return SIDE_ANSWER
