"""TCP 127.0.0.1:<port> -> a Unix socket, then the command: the sandbox's endpoints.

``python -I -S forward.py --listen PORT=SOCKET [--listen ...] -- COMMAND...`` listens on
127.0.0.1:PORT for each pair, forks the forwarder, and execs COMMAND in its own place (so
the command keeps the pid its launcher knows). Each connection is carried both ways to a
new connection to SOCKET; the forwarder dies with the command (PR_SET_PDEATHSIG).

Under bwrap this runs inside the sandbox, in its own network namespace, with each SOCKET
the host's Unix socket bound in: the agent reaches the harness's endpoint and nothing else
of the host's loopback. Under runtime none (and apptainer, which shares the host's
network) it runs on the host and listens on the host's loopback.

Stdlib only, importing nothing of the harness: inside a sandbox the harness's package is
out of sight (this one file is bound in).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading

_PR_SET_PDEATHSIG = 1
#: the exit code when a port cannot be listened on (the command never started)
LISTEN_FAILED = 125


def parse(argv: list[str]) -> tuple[list[tuple[int, str]], list[str]]:
    """(port, socket path) pairs and the command, from ``--listen P=S ... -- CMD``."""
    pairs, i = [], 0
    while i < len(argv) and argv[i] == "--listen":
        port, _, path = argv[i + 1].partition("=")
        pairs.append((int(port), path))
        i += 2
    if i >= len(argv) or argv[i] != "--" or i + 1 >= len(argv):
        raise SystemExit("forward.py: usage: --listen PORT=SOCKET [...] -- COMMAND...")
    return pairs, argv[i + 1 :]


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """src -> dst until src ends; then dst's write side is shut (a half-close passes on)."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _carry(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_carry, args=(client, path), daemon=True).start()


def _forwarder(listeners: list[tuple[socket.socket, str]], parent: int) -> None:
    """The forked child: dies with the command (its parent, which execs it)."""
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the command already ended
        os._exit(0)
    os.dup2(os.open(os.devnull, os.O_RDWR), 0)
    threads = [threading.Thread(target=_serve, args=pair, daemon=True) for pair in listeners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    os._exit(0)


def listen(pairs: list[tuple[int, str]]) -> list[tuple[socket.socket, str]]:
    listeners = []
    for port, path in pairs:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            print(f"[harness] endpoint 127.0.0.1:{port}: cannot listen ({e.strerror})", file=sys.stderr)
            raise SystemExit(LISTEN_FAILED) from None
        s.listen(128)
        listeners.append((s, path))
    return listeners


def main(argv: list[str]) -> None:
    pairs, command = parse(argv)
    listeners = listen(pairs)
    parent = os.getpid()
    if os.fork() == 0:
        _forwarder(listeners, parent)
    for s, _ in listeners:  # the command gets no listening socket
        s.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
