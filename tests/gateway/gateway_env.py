"""Helpers of the gateway tests: the real gateway process (ptb_harness.gateway) in front of
the scripted model server (tests/agents/scripted_server.py, a test stand-in for the
providers), and a plain HTTP client."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import secrets
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AGENTS_TESTS = Path(__file__).resolve().parents[1] / "agents"
sys.path.insert(0, str(AGENTS_TESTS))  # scripted_server and its protocols/ import each other by name

from scripted_server import Plan, ScriptedServer  # noqa: E402

from ptb_harness.gateway.config import GatewayConfig  # noqa: E402
from ptb_harness.gateway.process import GatewayProcess  # noqa: E402

ALL_PROTOCOLS = ["anthropic", "openai_chat", "openai_responses", "gemini"]


def usage(i: int, o: int, c: int) -> dict:
    return {"usage": {"input_tokens": i, "output_tokens": o, "cached_tokens": c}}


@dataclass
class Running:
    gateway: GatewayProcess
    server: ScriptedServer
    key: str
    token: str
    log_path: Path

    def post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        return request(self.gateway, "POST", path, body, headers)

    def log(self) -> list[dict]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]


def request(
    gateway: GatewayProcess, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    if gateway.port is not None:
        conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
    else:
        conn = UnixHTTPConnection(gateway.ready["socket"])
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    conn.request(method, path, data, {"content-type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    out = resp.status, resp.read()
    conn.close()
    return out


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str):
        super().__init__("localhost", timeout=30)
        self.socket_path = path

    def connect(self) -> None:
        # through the directory's descriptor: the path may be longer than an address may be
        path = Path(self.socket_path)
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(f"/proc/self/fd/{fd}/{path.name}")
        finally:
            os.close(fd)


@contextlib.contextmanager
def gateway_before(
    tmp_path: Path, plan: Plan, protocol: str = "anthropic", upstream: str | None = None, **config: Any
) -> Iterator[Running]:
    """The scripted server (all four protocols) and a real gateway process in front of it."""
    key = f"sk-real-{secrets.token_hex(12)}"
    token = f"ptbgw-{secrets.token_hex(16)}"
    log_path = tmp_path / "llm_log.jsonl"
    with ScriptedServer(plan, ALL_PROTOCOLS) as server:
        cfg = GatewayConfig(
            upstream=upstream or server.url,
            key=key,
            token=token,
            protocol=protocol,  # type: ignore[arg-type]
            log_path=log_path,
            **config,
        )
        with GatewayProcess(cfg, os.environ, tmp_path / "gateway.log") as gateway:
            yield Running(gateway, server, key, token, log_path)
