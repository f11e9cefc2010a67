"""Sandbox endpoints: inside, TCP 127.0.0.1:<port> reaches a host Unix socket (the gateway's
hook). Tested with a tiny echo server on a Unix socket, through real launches: runtime none
(the forwarder on the host's loopback) and bwrap (the socket bound in, the forwarder inside)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ptb_harness.campaign.config import campaign_with_defaults
from ptb_harness.runtime import forward
from ptb_harness.runtime.sandbox import Endpoint, LaunchRequest, Sandbox, forwarding

#: inside: one connection, 1 MB each way with a half-close, then a second connection
CLIENT = r"""
import socket, sys
port = int(sys.argv[1])
c = socket.create_connection(("127.0.0.1", port), timeout=30)
c.sendall(b"ping" + b"x" * 1_000_000)
c.shutdown(socket.SHUT_WR)
got = b""
while chunk := c.recv(65536):
    got += chunk
print("GOT", got[:9].decode(), len(got))
d = socket.create_connection(("127.0.0.1", port), timeout=30)
d.sendall(b"again"); d.shutdown(socket.SHUT_WR)
print("GOT", d.recv(100)[:10].decode())
"""


class EchoServer:
    """A Unix-socket server that answers each connection with 'echo:' + all it read, then
    closes it (so a second answer needs a second connection)."""

    def __init__(self, path: Path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
        conn.sendall(b"echo:" + data)
        conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def echo(tmp_path):
    server = EchoServer(tmp_path / "gateway.sock")
    yield server
    server.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def site(runtime: str):
    return campaign_with_defaults({"site": {"runtime": runtime}}).settings.site.runtime


def launch_and_run(tmp_path: Path, runtime: str, endpoints: list[Endpoint], command: list[str]):
    home, tmp = tmp_path / "job/home", tmp_path / "job/tmp"
    (home / "task").mkdir(parents=True, exist_ok=True)
    tmp.mkdir(exist_ok=True)
    request = LaunchRequest(
        role="agent", command=command, job_home=home, job_tmp=tmp, workdir="task", env={}, endpoints=endpoints
    )
    launch = Sandbox(site(runtime), {"PATH": os.environ["PATH"]}).launch(request)
    # capture_output: this returns only once every holder of the pipes is gone, the
    # forwarder included (it dies with the command)
    res = subprocess.run(launch.argv, env=launch.env, cwd=launch.cwd, capture_output=True, text=True, timeout=120)
    return launch, res


@pytest.mark.parametrize("runtime", ["none", "bwrap"])
def test_tcp_on_loopback_inside_reaches_the_host_unix_socket(tmp_path, echo, runtime):
    port = free_port()
    launch, res = launch_and_run(tmp_path, runtime, [Endpoint(echo.path, port)], ["python", "-c", CLIENT, str(port)])
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[:2] == ["GOT echo:ping 1000009", "GOT echo:again"], res.stdout + res.stderr
    if runtime == "bwrap":
        # the host's socket is bound in read-only beside the forwarder; the command runs behind it
        inside = f"/run/ptb/endpoint-{port}.sock"
        at = launch.argv.index(inside)
        assert launch.argv[at - 2 : at + 1] == ["--ro-bind", str(echo.path), inside]
        assert launch.argv[-7:-3] == ["--listen", f"{port}=/run/ptb/endpoint-{port}.sock", "--", "python"]


def test_the_command_keeps_its_exit_code_and_its_pid(tmp_path, echo):
    port = free_port()
    _, res = launch_and_run(tmp_path, "none", [Endpoint(echo.path, port)], ["bash", "-c", "echo pid=$$; exit 7"])
    assert res.returncode == 7 and res.stdout.startswith("pid=")


def test_a_port_taken_on_the_host_says_so_in_one_line(tmp_path, echo):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _, res = launch_and_run(tmp_path, "none", [Endpoint(echo.path, port)], ["true"])
    assert res.returncode == forward.LISTEN_FAILED
    assert res.stderr.strip() == f"[harness] endpoint 127.0.0.1:{port}: cannot listen (Address already in use)"


def test_an_endpoint_whose_socket_has_no_listener_drops_the_connection(tmp_path):
    port = free_port()
    probe = "import socket,sys; c=socket.create_connection(('127.0.0.1', int(sys.argv[1]))); print(repr(c.recv(10)))"
    _, res = launch_and_run(
        tmp_path, "none", [Endpoint(tmp_path / "nobody.sock", port)], [sys.executable, "-c", probe, str(port)]
    )
    assert res.returncode == 0 and res.stdout.strip() == "b''"


def test_endpoints_are_checked_and_without_any_the_command_runs_as_given():
    assert forwarding([], ["bash", "x"], "/f.py", inside=True) == ["bash", "x"]
    with pytest.raises(ValueError, match="given twice"):
        forwarding([Endpoint(Path("/a.sock"), 80), Endpoint(Path("/b.sock"), 80)], ["x"], "/f.py", inside=True)
    with pytest.raises(ValueError, match="not a TCP port"):
        Endpoint(Path("/a.sock"), 70000)
    with pytest.raises(ValueError, match="absolute"):
        Endpoint(Path("a.sock"), 80)
    pairs, command = forward.parse(["--listen", "80=/a.sock", "--listen", "81=/b.sock", "--", "bash", "-c", "x"])
    assert pairs == [(80, "/a.sock"), (81, "/b.sock")] and command == ["bash", "-c", "x"]


WAIT_FOR_GO = r"""
import os, socket, sys, time
port = int(sys.argv[1])
c = socket.create_connection(("127.0.0.1", port), timeout=30)
c.sendall(b"inside"); c.shutdown(socket.SHUT_WR)
print("GOT", c.recv(100).decode(), flush=True)
while not os.path.exists("/tmp/go"):  # the host binds the same port meanwhile
    time.sleep(0.05)
"""


@pytest.mark.parametrize("network", ["internet", "none"])
def test_under_bwrap_the_port_is_the_sandboxs_own_not_the_hosts(tmp_path, echo, network):
    port = free_port()
    home, tmp = tmp_path / "job/home", tmp_path / "job/tmp"
    (home / "task").mkdir(parents=True)
    tmp.mkdir()
    settings = campaign_with_defaults({"site": {"runtime": "bwrap", "network": network}}).settings.site.runtime
    request = LaunchRequest(
        role="agent",
        command=["python", "-c", WAIT_FOR_GO, str(port)],
        job_home=home,
        job_tmp=tmp,
        workdir="task",
        env={},
        endpoints=[Endpoint(echo.path, port)],
    )
    launch = Sandbox(settings, {"PATH": os.environ["PATH"]}).launch(request)
    proc = subprocess.Popen(launch.argv, env=launch.env, cwd=launch.cwd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "GOT echo:inside"
        # while the sandbox listens on 127.0.0.1:<port>, the host's 127.0.0.1:<port> is free
        with socket.socket() as host_side:
            host_side.bind(("127.0.0.1", port))
        (tmp / "go").touch()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()  # the launch this test started
            proc.wait()
