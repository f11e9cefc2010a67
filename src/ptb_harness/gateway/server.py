"""The gateway itself: a reverse proxy on aiohttp (server and client in one well-kept
asyncio stack that streams both ways) between one cell's agent and its provider.

Per request: the cell's token is checked (401 otherwise) and swapped for the real key in
the auth headers it came in; the route is checked (only model calls and their free
helpers pass); the budget is checked before a model call; the request goes to the
upstream unchanged but for the key (and, for a streamed Chat Completions call, a request
for its usage); the answer comes back unchanged, a stream chunk by chunk, and the meter
reads its usage (a stream's once it ended: SseUsage; one the agent stops reading is read
to its end, as the provider bills it; one whose usage it cannot read ends the session
under a token or USD limit: meter.py); one line goes to llm_log.jsonl. Events for the harness (ready, budget
exhausted, the final summary) are JSON lines on stdout.
"""

from __future__ import annotations

import hmac
import json
import re
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
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
from ptb_harness.gateway.request_log import CappedBody, HeadTail, RequestLog
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
AGENT_CLOSED = "the agent closed the stream before its end"


@dataclass
class Exchange:
    """One request as it passes: what the log line and the meter need."""

    #: when it came, on the wall clock: what the log line states
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
    #: why a successful model call's usage could not be read (the meter fails closed)
    usage_unreadable: str | None = None
    request: CappedBody | None = None
    response: CappedBody | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: when it came, on the monotonic clock: what its latencies are measured from (a
    #: wall-clock step mid-request cannot make one negative)
    began: float = field(default_factory=time.monotonic)

    def elapsed_ms(self) -> float:
        return (time.monotonic() - self.began) * 1000


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
                ex.status, ex.ttfb_ms = up.status, ex.elapsed_ms()
                headers = {k: v for k, v in up.headers.items() if k.lower() not in _HOP}
                close = up.headers.get("connection", "").lower() == "close"
                if up.content_type == "text/event-stream":
                    return await self._stream(request, up, headers, ex, reader, close)
                data = await up.content.read()
                ex.response.add(data)
                # a JSON object, or an array of them (Gemini's stream without alt=sse)
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
        await self._to_agent(ex, out.prepare(request))
        events = SseUsage()
        try:
            async for chunk in up.content.iter_any():
                ex.response.add(chunk)  # type: ignore[union-attr]
                events.add(chunk)
                if ex.error is None:
                    await self._to_agent(ex, out.write(chunk))
            if ex.error is None:
                await self._to_agent(ex, out.write_eof())
            return out
        finally:  # what the stream stated, however it ended
            if reader is not None:
                for event in events.events():
                    reader.feed(event)

    @staticmethod
    async def _to_agent(ex: Exchange, write: Awaitable[Any]) -> None:
        """A write toward the agent. The agent may close its end at any time (Codex closes a
        stream once it has read the last event): that is no provider failure (a
        ClientConnectionResetError is a ClientError too, which _forward would take for
        one), and the provider bills the whole answer, so it is still read to its end and
        metered (else closing early would be a call without a cost)."""
        try:
            await write
        except ConnectionResetError:  # aiohttp's ClientConnectionResetError included
            ex.error = AGENT_CLOSED

    def _meter(self, ex: Exchange, reader: UsageReader) -> None:
        ex.usage = reader.usage()
        if ex.usage is not None:
            cost = self.prices.cost(ex.model, ex.protocol, ex.usage)
            ex.cost_usd, ex.price_source = cost.usd, cost.source
        if 200 <= ex.status < 300:
            ex.usage_unreadable = reader.unreadable()
        readable = ex.usage_unreadable is None
        self.meter.add(ex.status, ex.elapsed_ms(), ex.usage, ex.cost_usd, readable)

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
                "latency_ms": round(ex.elapsed_ms(), 2),
                "ttfb_ms": round(ex.ttfb_ms, 2) if ex.ttfb_ms is not None else None,
                "usage": ex.usage.record() if ex.usage is not None else None,
                "cost_usd": round(ex.cost_usd, 8) if ex.cost_usd is not None else None,
                "price_source": ex.price_source,
                "refused": ex.refused,
                "error": ex.error,
                "usage_unreadable": ex.usage_unreadable,
                "request": ex.request.record(self.redact) if ex.request else None,
                "response": ex.response.record(self.redact) if ex.response else None,
                "totals": self.meter.totals(),
            }
        )


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


class SseUsage(HeadTail):
    """The server-sent events of one stream that may state its usage, read once the stream
    has ended: the whole events in its first ``HEAD`` bytes, in its last ``TAIL`` bytes,
    and its last two events whole, whatever their size (up to ``MAX_EVENTS`` bytes).

    Every protocol states a stream's usage at its start (Anthropic's message_start) or in
    one of its last two events (Anthropic's message_delta before message_stop, the last
    Chat Completions chunk before [DONE], Gemini's last chunk, whose usageMetadata is the
    running total, Responses' response.completed, which repeats the request's instructions
    and tools: as big as the agent makes them), and the last value stated for a field wins:
    a stream up to HEAD + TAIL bytes is read whole, a longer one loses only events in its
    middle, which state none. Per chunk only a search from its end for its last event ends;
    the usage is searched once, at the end (a search of each chunk for the word cost the
    copy a third of its throughput: bench/README.md)."""

    HEAD = 64 * 1024
    TAIL = 2**20
    #: the most the last two events are kept whole for: a request's size and an answer's
    MAX_EVENTS = MAX_REQUEST_BYTES + 16 * 2**20
    #: event ends kept back from the last: the second-last event's start is the third-last
    #: end, and one more (the kept part's first event is dropped as cut, however it starts)
    _ENDS = 4

    def __init__(self, head: int = HEAD, tail: int = TAIL) -> None:
        super().__init__(head, tail)
        # the last chunks back to the one holding the fourth-last event end: (ends, bytes)
        self.last_events: deque[tuple[int, int]] = deque()
        self.last_ends = self.last_bytes = 0
        self.junction = b""  # the last byte before this chunk
        self.crlf = False

    def _pinned(self, chunk: bytes) -> int:
        """How many of the last chunks hold the last two events (HeadTail keeps them)."""
        self.crlf = self.crlf or b"\r" in chunk[:4096]
        ends = self._ends(chunk)
        self.junction = chunk[-3:]
        self.last_events.append((ends, len(chunk)))
        self.last_ends, self.last_bytes = self.last_ends + ends, self.last_bytes + len(chunk)
        while len(self.last_events) > 1 and self.last_ends - self.last_events[0][0] >= self._ENDS:
            first_ends, first_bytes = self.last_events.popleft()
            self.last_ends, self.last_bytes = self.last_ends - first_ends, self.last_bytes - first_bytes
        return len(self.last_events) if self.last_bytes <= self.MAX_EVENTS else 0

    def _ends(self, chunk: bytes) -> int:
        """Event ends (blank lines) in the chunk, up to _ENDS, searched from its end; one
        across the chunk's start counts too."""
        n, at = 0, len(chunk)
        while n < self._ENDS:
            at = max(chunk.rfind(b"\n\n", 0, at), chunk.rfind(b"\r\n\r\n", 0, at) if self.crlf else -1)
            if at < 0:
                break
            n += 1
        joined = self.junction + chunk[:3]
        straddles = joined.find(b"\r\n\r\n") if self.crlf else -1
        if 0 <= straddles < len(self.junction) or (self.junction.endswith(b"\n") and chunk.startswith(b"\n")):
            n += 1
        return n

    def events(self) -> list[Any]:
        """The JSON of each whole event holding the word ``usage`` (or ``usageMetadata``),
        in stream order; a last event the stream never ended is none."""
        head, tail = self.parts()
        if not self.dropped:
            return _usage_events(head + tail)
        head, tail = _lf(head), _lf(tail)
        # the head's last event and the tail's first are cut by the middle left out
        return _usage_events(head[: head.rfind(b"\n\n") + 2]) + _usage_events(tail[tail.find(b"\n\n") + 2 :])


def _lf(data: bytes) -> bytes:
    """SSE lines end in LF, CRLF or CR alike: LF only."""
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if b"\r" in data else data


def _usage_events(data: bytes) -> list[Any]:
    """The JSON of the data of each ended event in data that holds the word usage: found
    by searching for the word (one pass over data), not by splitting every event."""
    data = _lf(data)
    ended = data.rfind(b"\n\n")  # what follows is an event the stream never ended
    out, at = [], 0
    while (hit := data.find(b"sage", at, ended)) >= 0:  # "usage", "usageMetadata"
        before = data.rfind(b"\n\n", 0, hit)
        start, stop = (before + 2 if before >= 0 else 0), data.find(b"\n\n", hit)
        lines = (ln[5:].lstrip() for ln in data[start:stop].split(b"\n") if ln.startswith(b"data:"))
        obj, _ = loads_bounded(b"\n".join(lines))
        if obj is not None:
            out.append(obj)
        at = stop + 2
    return out


def emit_line(event: dict[str, Any]) -> None:
    """An event for the harness: one JSON line on stdout."""
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()
