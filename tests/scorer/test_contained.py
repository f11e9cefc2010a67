"""Model-written code runs contained: a separate process with limits, never the scorer's.
(What the code says of itself, its exit status, decides nothing: tests/scorer/test_proxied_check.py.)"""

from __future__ import annotations

import os
import socket
import time
import uuid

import pytest

from ptb_scorer.contained import Limits, run_python

FAST = Limits(timeout_s=3, cpu_seconds=3)

FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
CASES = {
    "ends normally": ("def add(a, b):\n    return a + b\nassert add(1, 2) == 3\n", 0, "exited"),
    "fails": ("def add(a, b):\n    return a - b\nassert add(1, 2) == 3\n", 1, "exited"),
    "syntax error": ("def add(a, b)\n    return a + b\n", 1, "exited"),
    "infinite loop": ("while True:\n    pass\n", None, "timeout"),
    "fork bomb": (FORK_BOMB, None, None),
    "10 GB allocation": ("x = bytearray(10 * 1024 ** 3)\nprint(len(x))\n", 1, "exited"),
}


@pytest.mark.parametrize("name", CASES)
def test_program_outcomes(name: str):
    code, exit_code, reason = CASES[name]
    start = time.monotonic()
    res = run_python(code, FAST)
    if exit_code is not None:
        assert res.exit_code == exit_code, (res.reason, res.stderr)
    if reason:
        assert res.reason == reason, res.stderr
    # bounded by the timeout, and the scorer (this process) is alive to say so
    assert time.monotonic() - start < FAST.timeout_s + 5
    if name == "10 GB allocation":
        assert "MemoryError" in res.stderr
    if name == "syntax error":
        assert "SyntaxError" in res.stderr


def _ours_left(marker: str) -> list[str]:
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    left.append(pid)
        except OSError:
            continue
    return left


@pytest.mark.parametrize("escape", ["fork bomb", "child in a session of its own"])
def test_nothing_the_program_started_outlives_it(escape):
    marker = f"ptb-marker-{uuid.uuid4().hex}"
    body = {
        "fork bomb": FORK_BOMB,
        # setsid leaves the process group the scorer kills: the PID namespace still ends it
        "child in a session of its own": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n",
    }[escape]
    # the marker on the command line of every process of it (re-exec with it as argument)
    reexec = f"os.execv(sys.executable, [sys.executable, '-I', '-S', __file__, {marker!r}])"
    code = f"import os, sys\nif {marker!r} not in sys.argv:\n    {reexec}\n" + body
    res = run_python(code, FAST)
    assert "pids:own" in res.applied or "pids:own(userns)" in res.applied, res.applied
    deadline = time.monotonic() + 10
    while _ours_left(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _ours_left(marker)


def test_no_network_no_scorer_files_no_parent_to_signal():
    # a listener on this machine's loopback, in the test's own network namespace: the
    # program, in a namespace of its own, must not reach it (only loopback is ever targeted)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        code = (
            "import socket, os\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2); print('NET')\n"
            "except OSError as e:\n    print('nonet', e.errno)\n"
            "print(sorted(os.environ))\n"
            "print('ppid', os.getppid())\n"
        )
        res = run_python(code, FAST)
        listener.setblocking(False)
        try:
            listener.accept()[0].close()
            reached = True
        except BlockingIOError:
            reached = False
    assert res.exit_code == 0, res.stderr
    if any(a.startswith("network:none") for a in res.applied):
        assert "nonet" in res.stdout and not reached
    # a clean environment: no HF token, no scorer variables reach the program
    assert "HF_HOME" not in res.stdout and "PATH" in res.stdout
    if any(a.startswith("pids:own") for a in res.applied):
        assert "ppid 0" in res.stdout  # its parent is outside its PID namespace: nothing to signal
    if os.geteuid() == 0:
        assert "uid:65534" in res.applied


def test_a_flood_of_output_is_read_bounded():
    res = run_python("import os\nfor _ in range(2048):\n    os.write(1, b'x' * 65536)\n", FAST)  # 128 MB
    assert res.exit_code == 0 and len(res.stdout) <= 4000
    assert len(res.stderr) < 100


def test_runs_in_its_own_temp_dir():
    res = run_python("import os\nprint(os.getcwd())\n", FAST)
    (cwd,) = res.stdout.split()
    assert os.path.basename(os.path.dirname(cwd)).startswith("ptb-contained-")
    assert not os.path.exists(cwd)  # removed afterwards
