"""The gateway itself: a reverse proxy on aiohttp (server and client in one well-kept
asyncio stack that streams both ways) between one cell's agent and its provider.

Per request: the cell's token is checked (401 otherwise) and swapped for the real key in
the auth headers it came in; the route is checked (only model calls and their free
helpers pass); the budget is checked before a model call; the request goes to the
upstream unchanged but for the key (and, for a streamed Chat Completions call, a request
for its usage); the answer comes back unchanged, a stream chunk by chunk, while the meter
reads its usage; one line goes to llm_log.jsonl. Events for the harness (ready, budget
exhausted, the final summary) are JSON lines on stdout.
"""

from __future__ import annotations

import hmac
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from ptb_harness.core.records import loads_bounded
from ptb_harness.gateway.config import MAX_REQUEST_BYTES, GatewayConfig
from ptb_harness.gateway.meter import Meter
from ptb_harness.gateway.prices import PriceTable
from ptb_harness.gateway.protocols import (
    Protocol,
    Route,
    TokenUsage,
    UsageReader,
    add_usage_request,
    error_body,
    is_stream,
    request_model,
    route,
    wants_usage_added,
)
from ptb_harness.gateway.request_log import CappedBody, RequestLog
from ptb_harness.traces.redact import Redactor

#: Headers a CLI may carry its key in; the token is swapped for the key in each.
AUTH_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key")
#: Never forwarded either way (hop-by-hop, or recomputed by the gateway's HTTP stack).
_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
     "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding", "content-encoding"}
)  # fmt: skip
#: A path the gateway forwards, as sent: plain segments only (no `.` or `..`, no escapes).
_SAFE_PATH = re.compile(r"^(?:/(?!\.\.?(?:/|$))[A-Za-z0-9_\-.:]+)+/?$")
#: How the budget's refusal is answered, per protocol: a status its client does not retry
#: at once where there is one (the harness stops the CLI right after anyway).
#: How much of a stream may wait in the gateway's buffers toward the agent (asyncio's
#: default of 64 KiB paused the copy at every chunk: 0.65x the direct throughput).
STREAM_BUFFER = 2**20
BUDGET_STATUS: dict[str, int] = {"anthropic": 400, "openai_responses": 429, "openai_chat": 429, "gemini": 429}


@dataclass
class Exchange:
    """One request as it passes: what the log line and the meter need."""

    started: float
    method: str
    path: str
    protocol: Protocol
    model: str | None = None
    stream: bool = False
    status: int = 0
    ttfb_ms: float | None = None
    usage: TokenUsage | None = None
    cost_usd: float | None = None
    price_source: str | None = None
    refused: str | None = None
    error: str | None = None
    request: CappedBody | None = None
    response: CappedBody | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _reject(protocol: Protocol, status: int, message: str, code: str | None = None) -> web.Response:
    return web.json_response(error_body(protocol, status, message, code), status=status)


class Gateway:
    def __init__(self, config: GatewayConfig, emit: Callable[[dict[str, Any]], None]):
        self.config = config
        self.emit = emit
        self.meter = Meter(config.limits)
        self.prices = PriceTable(config.prices, config.upstream)
        self.redact = Redactor({**config.secrets, "PTB_LLM_KEY": config.key, "PTB_LLM_TOKEN": config.token})
        self.log = RequestLog(config.log_path, self.redact, config.max_body_bytes, config.attempt)
        self.upstream = config.upstream.rstrip("/")
        self.session: aiohttp.ClientSession | None = None
        self.exhausted_sent = False

    # -- the app --------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, _app: web.Application) -> None:
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=64, ttl_dns_cache=300),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=900),
            trust_env=True,  # the site's HTTPS_PROXY, when the provider is behind one
            auto_decompress=True,
            read_bufsize=2**20,
        )

    async def _close(self, _app: web.Application) -> None:
        if self.session is not None:
            await self.session.close()
        self.log.close()

    # -- one request ----------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        r = route(request.method, path)
        ex = Exchange(time.time(), request.method, path, (r.protocol if r else None) or self.config.protocol)
        try:
            return await self._handle(request, r, ex)
        finally:
            self._finish(ex)

    async def _handle(self, request: web.Request, r: Route | None, ex: Exchange) -> web.StreamResponse:
        if not self._token_ok(request):
            return self._refuse(ex, "token", 401, "ptb-harness gateway: wrong or missing token")
        if r is None or not _SAFE_PATH.match(request.raw_path.split("?", 1)[0]):
            return self._refuse(
                ex, "path", 404, f"ptb-harness gateway: {request.method} {request.path} is not a model call"
            )
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return self._refuse(ex, "body", 413, f"ptb-harness gateway: request body over {MAX_REQUEST_BYTES} bytes")
        parsed, _ = loads_bounded(body) if body else (None, "")
        ex.model, ex.stream = request_model(r, parsed), is_stream(r, parsed)
        ex.request = self.log.body()
        ex.request.add(body)
        if r.metered:
            refusal = self._budget_refusal(ex)
            if refusal is not None:
                return refusal
            if wants_usage_added(r, parsed):
                body = json.dumps(add_usage_request(parsed)).encode()
        return await self._forward(request, r, ex, body)

    def _token_ok(self, request: web.Request) -> bool:
        token = self.config.token
        given = [request.headers.get(h, "") for h in AUTH_HEADERS] + [request.query.get("key", "")]
        return any(hmac.compare_digest(g.removeprefix("Bearer ").strip(), token) for g in given if g)

    def _refuse(self, ex: Exchange, why: str, status: int, message: str) -> web.Response:
        ex.refused, ex.status, ex.error = why, status, message
        self.meter.refused[why] += 1
        answer = _reject(ex.protocol, status, message)
        ex.response = self.log.body()  # what the agent was told, in the log too
        ex.response.add(answer.body)  # type: ignore[arg-type]
        return answer

    def _budget_refusal(self, ex: Exchange) -> web.Response | None:
        reached = self.meter.exhausted()
        if reached is not None:
            message = f"ptb-harness gateway: this cell's LLM budget is exhausted ({reached}); the session is over"
            response = self._refuse(ex, "llm_budget", BUDGET_STATUS[ex.protocol], message)
            if not self.exhausted_sent:
                self.exhausted_sent = True
                self.emit({"event": "llm_budget_exhausted", "reason": reached})
            return response
        if self.config.limits.usd is not None and not self.prices.known(ex.model, ex.protocol):
            message = (
                f"ptb-harness gateway: model {ex.model!r} has no price and this cell's LLM budget is in USD "
                "(name its price in the campaign's solve.llm_prices)"
            )
            return self._refuse(ex, "unpriced", 400, message)
        return None

    def _upstream_headers(self, request: web.Request) -> CIMultiDict[str]:
        token, key = self.config.token, self.config.key
        headers: CIMultiDict[str] = CIMultiDict()
        for name, value in request.headers.items():
            low = name.lower()
            if low in _HOP:
                continue
            if low in AUTH_HEADERS:
                if token not in value:
                    continue  # an auth header without the token carries nothing of ours
                value = value.replace(token, key)
            headers.add(name, value)
        if request.query.get("key"):  # Gemini's ?key=: the key goes in its header, not a URL
            headers["x-goog-api-key"] = key
        headers["Accept-Encoding"] = "identity"
        return headers

    def _upstream_url(self, request: web.Request) -> str:
        query = [(k, v) for k, v in request.query.items() if k != "key"]
        qs = "&".join(f"{k}={v}" for k, v in query)
        raw_path = request.raw_path.split("?", 1)[0]
        return f"{self.upstream}{raw_path}" + (f"?{qs}" if qs else "")

    async def _forward(self, request: web.Request, r: Route, ex: Exchange, body: bytes) -> web.StreamResponse:
        assert self.session is not None
        reader = UsageReader(r.protocol) if r.protocol else None
        ex.response = self.log.body()
        try:
            async with self.session.request(
                request.method, self._upstream_url(request), headers=self._upstream_headers(request), data=body or None
            ) as up:
                ex.status, ex.ttfb_ms = up.status, (time.time() - ex.started) * 1000
                headers = {k: v for k, v in up.headers.items() if k.lower() not in _HOP}
                close = up.headers.get("connection", "").lower() == "close"
                if up.content_type == "text/event-stream":
                    return await self._stream(request, up, headers, ex, reader, close)
                data = await up.content.read()
                ex.response.add(data)
                if reader is not None and b"sage" in data:
                    reader.feed(loads_bounded(data)[0])
                answer = web.Response(status=up.status, headers=headers, body=data)
                if close:
                    answer.force_close()
                return answer
        except (TimeoutError, aiohttp.ClientError) as e:
            ex.status, ex.error = 0, f"the provider could not be reached: {type(e).__name__}: {str(e)[:200]}"
            return _reject(ex.protocol, 502, f"ptb-harness gateway: {ex.error}")
        finally:
            if reader is not None and r.metered:
                self._meter(ex, reader)

    async def _stream(
        self,
        request: web.Request,
        up: aiohttp.ClientResponse,
        headers: dict[str, str],
        ex: Exchange,
        reader: UsageReader | None,
        close: bool,
    ) -> web.StreamResponse:
        out = web.StreamResponse(status=up.status, headers=headers)
        if close:  # the provider ends the connection with the stream: so does the gateway
            out.force_close()
        if request.transport is not None:  # room for a few chunks in flight to the agent
            request.transport.set_write_buffer_limits(high=STREAM_BUFFER)
        await out.prepare(request)
        events = SseEvents()
        async for chunk in up.content.iter_any():
            ex.response.add(chunk)  # type: ignore[union-attr]
            if reader is not None:
                for event in events.feed(chunk):
                    reader.feed(event)
            try:
                await out.write(chunk)
            except (ConnectionResetError, aiohttp.ClientConnectionResetError):
                ex.error = "the agent closed the stream before its end"
                return out
        await out.write_eof()
        return out

    def _meter(self, ex: Exchange, reader: UsageReader) -> None:
        ex.usage = reader.usage()
        if ex.usage is not None:
            cost = self.prices.cost(ex.model, ex.protocol, ex.usage)
            ex.cost_usd, ex.price_source = cost.usd, cost.source
        self.meter.add(ex.status, (time.time() - ex.started) * 1000, ex.usage, ex.cost_usd)

    def _finish(self, ex: Exchange) -> None:
        self.log.write(
            {
                "time": _iso(ex.started),
                "method": ex.method,
                "path": ex.path,
                "protocol": ex.protocol,
                "model": ex.model,
                "stream": ex.stream,
                "status": ex.status,
                "latency_ms": round((time.time() - ex.started) * 1000, 2),
                "ttfb_ms": round(ex.ttfb_ms, 2) if ex.ttfb_ms is not None else None,
                "usage": ex.usage.record() if ex.usage is not None else None,
                "cost_usd": round(ex.cost_usd, 8) if ex.cost_usd is not None else None,
                "price_source": ex.price_source,
                "refused": ex.refused,
                "error": ex.error,
                "request": ex.request.record(self.redact) if ex.request else None,
                "response": ex.response.record(self.redact) if ex.response else None,
                "totals": self.meter.totals(),
            }
        )


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


class SseEvents:
    """Server-sent events from a byte stream fed in chunks: the JSON of each event's data
    that may hold usage. Others are never parsed, and a chunk without the word is only
    searched: a stream's cost stays a few byte searches per chunk."""

    MAX_EVENT = 4 * 2**20

    def __init__(self) -> None:
        self.rest = b""  # the start of an event not ended yet

    def feed(self, chunk: bytes) -> list[Any]:
        data = self.rest + chunk
        if b"\r" in data:  # CRLF lines (a CR at a chunk's end meets its LF in the next one)
            data = data.replace(b"\r\n", b"\n")
        if b"sage" not in data:  # "usage", "usageMetadata"
            end = data.rfind(b"\n\n")
            self.rest = data[end + 2 :] if end >= 0 else data
            self.rest = self.rest if len(self.rest) <= self.MAX_EVENT else b""
            return []
        *events, self.rest = data.split(b"\n\n")
        if len(self.rest) > self.MAX_EVENT:  # one event this big is no usage event: drop it
            self.rest = b""
        out = []
        for raw in events:
            if b"sage" in raw:
                lines = (ln[5:].lstrip() for ln in raw.split(b"\n") if ln.startswith(b"data:"))
                obj, _ = loads_bounded(b"\n".join(lines))
                if obj is not None:
                    out.append(obj)
        return out


def emit_line(event: dict[str, Any]) -> None:
    """An event for the harness: one JSON line on stdout."""
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()
