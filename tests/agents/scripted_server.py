"""A TEST STAND-IN for a model provider: an HTTP server on 127.0.0.1 that replays a plan.

Not a model and not a proxy. The real agent CLIs are pointed at it with their base-URL
settings; it answers in the provider's wire protocol (one plug-in per protocol under
``tests/agents/protocols/``) from a scripted plan and records every request it gets
(method, path, headers, body), so a test can assert what the CLI sent and to whom.

Plan: ``Plan(model, steps)``; each step is ``{"shell": "<command>"}`` (the model calls
its shell tool with that command) or ``{"text": "..."}`` (a final answer), each with
``"usage": {"input_tokens", "output_tokens", "cached_tokens"}`` (``input_tokens``
includes the cached ones; each protocol maps them to its own fields), or ``{"fail": 503}``
(the provider failing that turn, every time it is asked: an error body with that status).

Which step answers a request is decided from the request alone (stateless, so a CLI's
retry gets the same answer): the number of model turns already in the conversation
(``count_model_turns`` in each protocol: assistant messages / model contents). Without
resumes that is the number of tool results; a resumed session (reprompt) that already
holds the tool call and the final text asks for step 2. Past the end of the plan the
last text step is repeated. A request for another model than the plan's (Claude Code's
small-fast calls, Gemini's router) gets ``SIDE_ANSWER`` with zero usage, and is recorded.

Protocol plug-in interface (a module in ``protocols/``)::

    def matches(method: str, path: str) -> bool
    def respond(request: Request, plan: Plan) -> Response

``respond`` may use ``plan.step_for(n_model_turns)``, ``plan.is_main_model(name)``,
``plan.record_usage(request, usage)`` (what the tests compare usage.json against) and
the SSE helpers below.
"""

from __future__ import annotations

import importlib
import json
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: The answer to requests for another model than the plan's (routing, titles, ...).
SIDE_ANSWER = "ok"
ZERO_USAGE = {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    time: float = field(default_factory=time.time)

    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except ValueError:
            return None


@dataclass
class Response:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    #: bytes, or an iterator of byte chunks (sent as they come, flushed each: SSE)
    body: bytes | Iterable[bytes] = b""


@dataclass
class Plan:
    model: str
    steps: list[dict[str, Any]]
    #: (request index, usage) for every answer from a plan step: what the CLI was told
    sent_usage: list[dict[str, int]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def step_for(self, model_turns: int) -> dict[str, Any]:
        if model_turns < len(self.steps):
            return self.steps[model_turns]
        texts = [s for s in self.steps if "text" in s]
        return texts[-1] if texts else {"text": SIDE_ANSWER, "usage": ZERO_USAGE}

    def is_main_model(self, name: str | None) -> bool:
        # some CLIs prefix the provider ("models/x", "provider/x"): compare the last part
        return name is None or str(name).rsplit("/", 1)[-1] == self.model.rsplit("/", 1)[-1]

    def record_usage(self, usage: dict[str, int]) -> None:
        with self._lock:
            self.sent_usage.append(dict(usage))

    def total_sent(self) -> dict[str, int]:
        total = dict.fromkeys(ZERO_USAGE, 0)
        for u in self.sent_usage:
            for k in total:
                total[k] += int(u.get(k, 0))
        return total


def usage_of(step: dict[str, Any]) -> dict[str, int]:
    u = {**ZERO_USAGE, **step.get("usage", {})}
    return {k: int(u[k]) for k in ZERO_USAGE}


def sse(event: str | None, data: Any) -> bytes:
    """One server-sent event (``event:`` line only when named)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache"}
JSON_HEADERS = {"content-type": "application/json"}


def json_response(data: Any, status: int = 200) -> Response:
    return Response(status, dict(JSON_HEADERS), json.dumps(data).encode())


def not_found(request: Request) -> Response:
    return json_response({"error": {"message": f"stand-in: no protocol serves {request.method} {request.path}"}}, 404)


class ScriptedServer:
    """``with ScriptedServer(plan, ["anthropic"]) as server: server.url ...``

    ``protocols`` are module names under tests/agents/protocols (tried in order). Every
    request is kept in ``server.requests``, answered or not.
    """

    def __init__(self, plan: Plan, protocols: Iterable[str]):
        self.plan = plan
        self.protocols = [importlib.import_module(f"protocols.{name}") for name in protocols]
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet: the record is the log
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.headers.get("transfer-encoding", "").lower() == "chunked":
                    body = _read_chunked(self.rfile)
                req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with server._lock:
                    server.requests.append(req)
                resp = server.answer(req)
                self._send(resp)

            def _send(self, resp: Response) -> None:
                self.send_response(resp.status)
                for k, v in resp.headers.items():
                    self.send_header(k, v)
                if isinstance(resp.body, (bytes, bytearray)):
                    self.send_header("content-length", str(len(resp.body)))
                    self.end_headers()
                    self.wfile.write(resp.body)
                    return
                # a stream: close the connection at its end (no chunked framing needed)
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for chunk in resp.body:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            # CONNECT: a CLI that tunnels HTTPS through a proxy pointing here is recorded too
            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_CONNECT = _handle

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def answer(self, request: Request) -> Response:
        path = request.path.split("?", 1)[0]
        for proto in self.protocols:
            if proto.matches(request.method, path):
                return self.failure(proto, request) or proto.respond(request, self.plan)
        return not_found(request)

    def failure(self, proto: Any, request: Request) -> Response | None:
        """The provider's error for a turn the plan fails (``{"fail": status}``), or None."""
        body, turns = request.json(), getattr(proto, "count_model_turns", None)
        if not isinstance(body, dict) or turns is None:  # a protocol without turns fails none
            return None
        step = self.plan.step_for(turns(body))
        if "fail" not in step:
            return None
        message = f"stand-in: the provider failed (HTTP {step['fail']})"
        return json_response({"error": {"type": "api_error", "code": "server_error", "message": message}}, step["fail"])

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def recorded(self) -> list[Request]:
        with self._lock:
            return list(self.requests)


def _read_chunked(rfile: Any) -> bytes:
    out = bytearray()
    while True:
        size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            rfile.readline()
            return bytes(out)
        out += rfile.read(size)
        rfile.readline()


def stream(chunks: Iterable[bytes]) -> Iterator[bytes]:
    yield from chunks
