"""A STAND-IN for a grader/judge model server, for tests only: it speaks just enough of
the OpenAI Chat Completions API (``POST /v1/chat/completions``, non-streaming) on
127.0.0.1 (port 0) to replay scripted answers, and records every request, headers
included, so tests can see what reached it (the auth header) and what did not.

Each request takes the next scripted action from ``script`` (a list, consumed in order);
when the script is empty, ``default(request) -> action`` decides. Actions:

- ``("answer", text)``: 200 with a chat completion whose content is text (usage counted);
- ``("status", code)``: that HTTP status with an error body (429 gets ``Retry-After: 0``);
- ``("hang", seconds)``: accept the request and answer nothing for that long;
- ``("garbage", bytes)``: 200 with that body, which is not a chat completion.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Action = tuple[str, Any]


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None

    @property
    def text(self) -> str:
        """All the text of the request's messages."""
        msgs = (self.body or {}).get("messages") or []
        return "\n".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))


@dataclass
class StandInGrader:
    script: list[Action] = field(default_factory=list)
    default: Callable[[Recorded], Action] = lambda req: ("answer", "ok")
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self) -> None:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                req = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with standin._lock:
                    standin.requests.append(req)
                    action = standin.script.pop(0) if standin.script else None
                if action is None:
                    action = standin.default(req)
                kind, arg = action
                if kind == "hang":
                    time.sleep(arg)
                    return
                if kind == "answer":
                    payload = {
                        "id": f"chatcmpl-standin-{len(standin.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": (body or {}).get("model", "?"),
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": arg}, "finish_reason": "stop"}
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    }
                    self._send(200, json.dumps(payload).encode())
                elif kind == "status":
                    extra = {"Retry-After": "0"} if arg == 429 else {}
                    self._send(arg, json.dumps({"error": {"message": f"scripted {arg}"}}).encode(), extra)
                elif kind == "garbage":
                    self._send(200, arg, content_type="text/plain")
                else:
                    raise ValueError(f"unknown stand-in action {kind}")

            def _send(self, code: int, data: bytes, extra: dict | None = None, content_type="application/json"):
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False  # a hanging handler must not hold up the test
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> StandInGrader:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
