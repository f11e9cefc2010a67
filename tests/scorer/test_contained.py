"""Model-written code runs contained: a separate process with limits, never the scorer's."""

from __future__ import annotations

import os
import time

import pytest

from ptb_scorer.contained import Limits, run_python

FAST = Limits(timeout_s=3, cpu_seconds=3)

FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
CASES = {
    "correct": ("def add(a, b):\n    return a + b\nassert add(1, 2) == 3\n", True, "ok"),
    "wrong": ("def add(a, b):\n    return a - b\nassert add(1, 2) == 3\n", False, "failed"),
    "syntax error": ("def add(a, b)\n    return a + b\n", False, "failed"),
    "infinite loop": ("while True:\n    pass\n", False, "timeout"),
    "fork bomb": (FORK_BOMB, False, None),
    "10 GB allocation": ("x = bytearray(10 * 1024 ** 3)\nprint(len(x))\n", False, "failed"),
}


@pytest.mark.parametrize("name", CASES)
def test_program_outcomes(name: str):
    code, passed, reason = CASES[name]
    start = time.monotonic()
    res = run_python(code, FAST)
    assert res.passed is passed, (res.reason, res.stderr)
    if reason:
        assert res.reason == reason, res.stderr
    # bounded by the timeout, and the scorer (this process) is alive to say so
    assert time.monotonic() - start < FAST.timeout_s + 5
    if name == "10 GB allocation":
        assert "MemoryError" in res.stderr
    if name == "syntax error":
        assert "SyntaxError" in res.stderr


def test_fork_bomb_leaves_no_process():
    run_python(CASES["fork bomb"][0], FAST)
    time.sleep(0.5)
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"program.py" in f.read():
                    left.append(pid)
        except OSError:
            continue
    assert not left


def test_no_network_and_no_scorer_files():
    code = (
        "import socket, os\n"
        "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=2); print('NET')\n"
        "except OSError as e:\n    print('nonet', e.errno)\n"
        "print(sorted(os.environ))\n"
    )
    res = run_python(code, FAST)
    assert res.passed, res.stderr
    if any(a.startswith("network:none") for a in res.applied):
        assert "nonet" in res.stdout
    # a clean environment: no HF token, no scorer variables reach the program
    assert "HF_HOME" not in res.stdout and "PATH" in res.stdout


def test_runs_in_its_own_temp_dir_as_another_process():
    res = run_python("import os\nprint(os.getcwd(), os.getpid(), os.getppid())\n", FAST)
    cwd, pid, _ = res.stdout.split()
    assert os.path.basename(cwd).startswith("ptb-contained-") and int(pid) != os.getpid()
    assert not os.path.exists(cwd)  # removed afterwards
