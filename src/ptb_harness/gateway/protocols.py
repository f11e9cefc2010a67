"""The provider APIs the shipped CLIs speak, as the gateway needs them: which requests are
model calls (and may pass at all), the usage each answer reports, and the error body each
protocol's clients understand.

Protocols: ``anthropic`` (Messages, ``POST .../v1/messages``), ``openai_responses``
(``POST .../responses``), ``openai_chat`` (``POST .../chat/completions``) and ``gemini``
(``POST .../models/<m>:generateContent`` and ``:streamGenerateContent``). A request is
recognised by its method and path alone, never by who sends it. Anything else the
upstream offers (files, batches, fine-tuning: spend the meter would not see) is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from ptb_scorer.llm_client import token_count

Protocol = Literal["anthropic", "openai_responses", "openai_chat", "gemini"]
PROTOCOLS: tuple[Protocol, ...] = ("anthropic", "openai_responses", "openai_chat", "gemini")

#: The most a token count in one answer may be: a larger (or a negative, or a non-integer)
#: value is not usage, and the answer counts as one that states none.
MAX_TOKENS_PER_ANSWER = 10**9

_GEMINI = re.compile(r"/models/(?P<model>[^/:]+):(?P<verb>generateContent|streamGenerateContent|countTokens)$")
#: a model list or one model's entry (GET): ``/models`` or ``/models/<id>`` at the path's
#: root or right under an API version (``/v1``, ``/v1beta``, after any base path), never
#: a ``/models`` segment deeper in another resource (``/v1/organization/usage/models``,
#: ``/v1/fine_tuning/jobs/models/<id>``, ``/v1/files/models/<id>/content``)
_MODEL_LIST = re.compile(r"(?:^|/v\d+(?:alpha|beta)?)/models(?:/[^/:]+)?$")


@dataclass(frozen=True)
class Route:
    """What a request is: its protocol, whether it is a metered model call (or a free
    helper: token counting, model lists), and the model a Gemini path names."""

    #: None for the free helpers every protocol has (model lists)
    protocol: Protocol | None
    metered: bool
    path_model: str | None = None
    #: the path says the answer is a stream (Gemini's streamGenerateContent)
    path_stream: bool = False


def route(method: str, path: str) -> Route | None:
    """The route of a request (path without the query), or None when it may not pass."""
    p = path.rstrip("/")
    if method == "GET":
        # model lists (a CLI may ask which models exist): free, no body
        return Route(None, metered=False) if _MODEL_LIST.search(p) else None
    if method != "POST":
        return None
    if p.endswith("/v1/messages"):
        return Route("anthropic", metered=True)
    if p.endswith("/v1/messages/count_tokens"):
        return Route("anthropic", metered=False)
    if p.endswith("/responses") or p.endswith("/responses/compact"):
        return Route("openai_responses", metered=True)
    if p.endswith("/chat/completions"):
        return Route("openai_chat", metered=True)
    m = _GEMINI.search(p)
    if m is not None:
        verb = m.group("verb")
        return Route("gemini", verb != "countTokens", m.group("model"), verb == "streamGenerateContent")
    return None


def request_model(r: Route, body: Any) -> str | None:
    """The model a request asks for (Gemini names it in the path)."""
    if r.path_model is not None:
        return r.path_model
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) else None


def is_stream(r: Route, body: Any) -> bool:
    return r.path_stream or (isinstance(body, dict) and body.get("stream") is True)


def wants_usage_added(r: Route, body: Any) -> bool:
    """A streamed Chat Completions request that did not ask for its usage: the gateway
    asks for it (``stream_options.include_usage``), the only protocol where it is optional."""
    if r.protocol != "openai_chat" or not isinstance(body, dict) or body.get("stream") is not True:
        return False
    options = body.get("stream_options")
    return not (isinstance(options, dict) and options.get("include_usage") is True)


def add_usage_request(body: dict[str, Any]) -> dict[str, Any]:
    options = body.get("stream_options")
    return {**body, "stream_options": {**(options if isinstance(options, dict) else {}), "include_usage": True}}


# -- usage ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenUsage:
    """One answer's tokens. ``input_tokens`` includes the cached ones (``cached_tokens``:
    read from a cache; ``cache_write_tokens``: written to one), whatever the provider's split."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def record(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


def _count(obj: Any, *keys: str) -> int | None:
    """obj[k1][k2]... as a token count, or None when absent or not a sane count."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return token_count(obj, MAX_TOKENS_PER_ANSWER)


#: The counts an answer of each protocol must state for its usage to be read: its input
#: and its output. Gemini's JSON leaves out a count that is zero (proto3), so an answer
#: without candidates states no output; every answer states its prompt.
REQUIRED_FIELDS: dict[Protocol, tuple[str, ...]] = {
    "anthropic": ("input", "output"),
    "openai_responses": ("input", "output"),
    "openai_chat": ("input", "output"),
    "gemini": ("input",),
}


class UsageReader:
    """Reads one answer's usage from its JSON body or its stream's events (fed in order).

    Each protocol states usage its own way; the last value a stream states for a field
    wins (Anthropic sends the input in message_start and the output, cumulative, in
    message_delta; Gemini repeats usageMetadata in every chunk). A JSON array (Gemini's
    streamGenerateContent without ``alt=sse``) is its elements in order."""

    def __init__(self, protocol: Protocol):
        self.protocol = protocol
        self.fields: dict[str, int] = {}

    def feed(self, event: Any) -> None:
        for item in event if isinstance(event, list) else [event]:
            if isinstance(item, dict):
                for key, value in _usage_fields(self.protocol, item).items():
                    if value is not None:
                        self.fields[key] = value

    def unreadable(self) -> str | None:
        """Why the answer's usage cannot be read (no usage, or not the counts its protocol
        always states: a missing, negative or absurd count), or None when it can."""
        if not self.fields:
            return "the answer states no usage"
        missing = [f"{k}_tokens" for k in REQUIRED_FIELDS[self.protocol] if k not in self.fields]
        return f"the answer's usage states no {' and no '.join(missing)}" if missing else None

    def usage(self) -> TokenUsage | None:
        f = self.fields
        if not f:
            return None
        if self.protocol == "anthropic":  # input_tokens there excludes both cache parts
            cached, written = f.get("cache_read", 0), f.get("cache_write", 0)
            return TokenUsage(f.get("input", 0) + cached + written, f.get("output", 0), cached, written)
        return TokenUsage(f.get("input", 0), f.get("output", 0) + f.get("thoughts", 0), f.get("cache_read", 0))


def _usage_fields(protocol: Protocol, event: dict[str, Any]) -> dict[str, int | None]:
    if protocol == "anthropic":
        u = event.get("usage")
        if not isinstance(u, dict) and isinstance(event.get("message"), dict):  # message_start
            u = event["message"].get("usage")
        return {
            "input": _count(u, "input_tokens"),
            "cache_read": _count(u, "cache_read_input_tokens"),
            "cache_write": _count(u, "cache_creation_input_tokens"),
            "output": _count(u, "output_tokens"),
        }
    if protocol == "openai_responses":
        u = event.get("usage")
        if not isinstance(u, dict) and isinstance(event.get("response"), dict):  # response.completed
            u = event["response"].get("usage")
        return {
            "input": _count(u, "input_tokens"),
            "cache_read": _count(u, "input_tokens_details", "cached_tokens"),
            "output": _count(u, "output_tokens"),
        }
    if protocol == "openai_chat":
        u = event.get("usage")
        return {
            "input": _count(u, "prompt_tokens"),
            "cache_read": _count(u, "prompt_tokens_details", "cached_tokens"),
            "output": _count(u, "completion_tokens"),
        }
    u = event.get("usageMetadata")
    return {
        "input": _count(u, "promptTokenCount"),
        "cache_read": _count(u, "cachedContentTokenCount"),
        "output": _count(u, "candidatesTokenCount"),
        "thoughts": _count(u, "thoughtsTokenCount"),
    }


# -- errors ---------------------------------------------------------------------------------
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error"}  # fmt: skip
_OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error",
                 404: "invalid_request_error", 413: "invalid_request_error", 429: "insufficient_quota"}  # fmt: skip
_GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                  413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED"}  # fmt: skip


def error_body(protocol: Protocol, status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """The JSON error body a client of ``protocol`` reads for ``status`` (4xx: its own
    fault or a limit; 502: the gateway could not reach the provider)."""
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message}}
    if protocol == "gemini":
        google = _GOOGLE_STATUS.get(status, "UNAVAILABLE")
        return {"error": {"code": status, "message": message, "status": google}}
    kind = _OPENAI_TYPES.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": code or kind}}
