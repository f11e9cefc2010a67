"""The gateway process: ``python -m ptb_harness.gateway``, started by the solve stage.

It reads its GatewayConfig as one JSON line on stdin, listens (a Unix socket, or a
loopback TCP port), says ``{"event": "ready", ...}`` on stdout, answers each ``sync <n>``
line on stdin with ``{"event": "synced", "n": <n>}`` (after every event it said before:
the harness's barrier), and serves until its stdin closes (the harness stopping it, or
dying: the gateway never outlives it) or it gets SIGTERM; then it waits briefly for the
requests in flight and says ``{"event": "summary", "meter": ...}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
from pathlib import Path

from aiohttp import web

from ptb_harness.gateway.config import GatewayConfig
from ptb_harness.gateway.prices import warm_up
from ptb_harness.gateway.server import Gateway, emit_line

_PR_SET_PDEATHSIG = 1
#: How long requests in flight may take to finish once the gateway is told to stop.
STOP_GRACE_S = 5.0
#: How long an idle kept-alive connection from the agent stays open.
KEEPALIVE_S = 5.0


def listen(socket_path: Path | None) -> socket.socket:
    """The listening socket: a Unix socket at socket_path (bound through its directory's
    descriptor, so a long scratch path is no problem), or 127.0.0.1 on a free port."""
    if socket_path is None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dir_fd = os.open(socket_path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(socket_path.name, dir_fd=dir_fd)
            sock.bind(f"/proc/self/fd/{dir_fd}/{socket_path.name}")
        finally:
            os.close(dir_fd)
        os.chmod(socket_path, 0o600)
    sock.listen(256)
    sock.setblocking(False)
    return sock


async def serve(config: GatewayConfig, stop: asyncio.Event) -> dict:
    """Serve until ``stop`` is set; returns the meter's summary."""
    gateway = Gateway(config, emit_line)
    # an idle connection is closed after a few seconds: a CLI whose runtime keeps a
    # kept-alive socket referenced (Node) must not wait minutes for it to exit
    runner = web.AppRunner(
        gateway.app(),
        access_log=None,
        handle_signals=False,
        shutdown_timeout=STOP_GRACE_S,
        keepalive_timeout=KEEPALIVE_S,
    )
    await runner.setup()
    sock = listen(config.socket_path)
    await web.SockSite(runner, sock).start()
    where = {"socket": str(config.socket_path)} if config.socket_path else {"port": sock.getsockname()[1]}
    emit_line({"event": "ready", **where})
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
    return gateway.meter.summary()


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


async def _main() -> int:
    loop = asyncio.get_running_loop()
    line = await loop.run_in_executor(None, sys.stdin.buffer.readline)
    config = GatewayConfig.from_json(line)
    await loop.run_in_executor(None, warm_up)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)

    def read_stdin() -> None:
        # each line "sync <n>" is answered on stdout after every event said before it
        # (on the loop, which says them all); EOF stops the gateway
        while line := sys.stdin.buffer.readline(256):
            word, _, n = line.strip().partition(b" ")
            if word == b"sync" and n.isdigit():
                loop.call_soon_threadsafe(emit_line, {"event": "synced", "n": int(n)})
        loop.call_soon_threadsafe(stop.set)

    # a daemon thread: a blocked read must not hold the process at exit (SIGTERM case)
    threading.Thread(target=read_stdin, name="stdin", daemon=True).start()
    summary = await serve(config, stop)
    emit_line({"event": "summary", "meter": summary})
    return 0


def main() -> int:
    _die_with_parent()
    try:
        return asyncio.run(_main())
    except KeyboardInterrupt:
        return 130
