import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from ptb_harness.runtime.procs import (
    ProcessResult,
    describe,
    exited_within,
    group_live_members,
    process_start_ticks,
    pump_timestamped,
    read_proc_stat,
    run_budgeted,
)

STAMP = rb"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\] "


class ChunkedReader(io.RawIOBase):
    """Delivers data in the given chunks, as a pipe does."""

    def __init__(self, chunks):
        self.chunks = list(chunks)

    def read1(self, n=-1):
        return self.chunks.pop(0) if self.chunks else b""


def test_every_line_gets_one_prefix_even_when_split_across_reads():
    out = io.BytesIO()
    pump_timestamped(ChunkedReader([b"hel", b"lo\nwor", b"ld\n\n", b"\xff\xfe binary\r\nlast"]), out)
    lines = out.getvalue().split(b"\n")
    assert len(lines) == 5
    for line, body in zip(lines, [b"hello", b"world", b"", b"\xff\xfe binary\r", b"last"], strict=False):
        assert re.fullmatch(STAMP + re.escape(body), line), line


def run(tmp_path: Path, script: str, budget: float = 10, grace: float = 1):
    out = tmp_path / "out.txt"
    res = run_budgeted(
        ["bash", "-c", script],
        env={"PATH": os.environ["PATH"]},
        cwd=tmp_path,
        output=out,
        budget_s=budget,
        kill_grace_s=grace,
    )
    return res, out.read_text()


def test_real_exit_code_and_output(tmp_path):
    res, out = run(tmp_path, "echo hi; echo err >&2; exit 7")
    assert (res.status, res.exit_code, res.signal) == ("exited", 7, None)
    assert re.search(r"\] hi\n", out) and re.search(r"\] err\n", out)
    assert oct((tmp_path / "out.txt").stat().st_mode & 0o777) == "0o600"


def test_killed_by_a_signal(tmp_path):
    res, _ = run(tmp_path, "kill -SEGV $$")
    assert (res.status, res.exit_code, res.signal) == ("signal", None, signal.SIGSEGV)


def test_timeout_term_is_enough_for_a_polite_child(tmp_path):
    res, _ = run(tmp_path, "sleep 30", budget=0.5, grace=5)
    assert (res.status, res.signal) == ("timeout", signal.SIGTERM)
    assert res.duration_s < 5


def test_timeout_kill_for_a_child_that_ignores_term(tmp_path):
    res, out = run(tmp_path, "trap 'echo ignored' TERM; while true; do sleep 0.05; done", budget=0.5, grace=0.5)
    assert (res.status, res.signal) == ("timeout", signal.SIGKILL)
    assert "ignored" in out
    assert res.duration_s < 5


def test_daemons_the_child_left_behind_are_stopped(tmp_path):
    pidfile = tmp_path / "daemon.pid"
    # a double-forked daemon in its own session: outside the child's process group
    res, _ = run(tmp_path, f"setsid bash -c 'echo $$ > {pidfile}; exec sleep 300' > /dev/null 2>&1 & sleep 0.3; exit 0")
    assert res.exit_code == 0
    pid = int(pidfile.read_text())
    deadline = time.time() + 5
    while time.time() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists(), "the agent's daemon survived the cell"


def test_sigterm_to_the_harness_stops_the_agent_first(tmp_path):
    pidfile = tmp_path / "agent.pid"
    code = (
        "import os, sys; from ptb_harness.runtime.procs import run_budgeted;"
        f"run_budgeted(['bash', '-c', 'echo $$ > {pidfile}; sleep 300'], env=dict(os.environ), cwd='{tmp_path}',"
        f" output='{tmp_path}/o.txt', budget_s=600, kill_grace_s=2)"
    )
    harness = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.time() + 10
    while not pidfile.exists() and time.time() < deadline:
        time.sleep(0.05)
    agent = int(pidfile.read_text())
    harness.send_signal(signal.SIGTERM)
    assert harness.wait(timeout=10) == 128 + signal.SIGTERM
    assert not Path(f"/proc/{agent}").exists()


def test_proc_stat_reader_copes_with_a_command_name_holding_spaces_and_parens(tmp_path):
    """The one /proc/PID/stat reader: the name field may hold ') (', so fields are taken
    after the last ')'; a zombie reads as such; a gone pid reads as None."""
    exe = tmp_path / "a) b (c"
    exe.symlink_to("/bin/sleep")
    child = subprocess.Popen([str(exe), "30"])
    try:
        stat = read_proc_stat(child.pid)
        assert stat is not None and stat.ppid == os.getpid() and not stat.zombie
        assert stat.start_ticks == process_start_ticks(child.pid) > 0
        child.kill()
        deadline = time.time() + 5
        while not read_proc_stat(child.pid).zombie and time.time() < deadline:
            time.sleep(0.01)
        assert read_proc_stat(child.pid).zombie  # killed, not yet waited for
    finally:
        child.kill()
        child.wait()
    assert read_proc_stat(child.pid) is None
    assert process_start_ticks(child.pid) is None


def test_proc_stat_reads_a_process_s_cpu_time():
    """cpu_seconds is user + system time: a child that spins has used some after it spun
    (CPU time, so a busy machine only makes it wait longer), a sleeping one none."""
    spin = "import time\nwhile time.process_time() < 0.5: pass\nprint(1, flush=True)\ntime.sleep(30)"
    spinner = subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE)
    sleeper = subprocess.Popen(["/bin/sleep", "30"])
    try:
        assert spinner.stdout.readline() == b"1\n"
        assert read_proc_stat(spinner.pid).cpu_seconds >= 0.4  # /proc counts in clock ticks
        assert read_proc_stat(sleeper.pid).cpu_seconds < 0.1
    finally:
        for child in (spinner, sleeper):
            child.kill()
            child.wait()


def _until_zombie(pid: int) -> None:
    deadline = time.time() + 5
    while not read_proc_stat(pid).zombie and time.time() < deadline:
        time.sleep(0.01)
    assert read_proc_stat(pid).zombie


def test_a_group_of_zombies_is_not_alive_and_not_stopped(tmp_path):
    """A signal reaches a zombie, so a process group holding only our own unreaped zombie
    children looked alive: stop_leftovers sent it SIGTERM and waited out its whole grace
    for it to go (it cannot: only our wait removes a zombie). Real processes in a real
    group: its live members leave out the zombies, and stop_leftovers (in a child Python,
    whose children it may kill) leaves the group alone and only reaps its orphan."""
    leader = subprocess.Popen(["sleep", "30"], process_group=0)
    member = subprocess.Popen(["true"], process_group=leader.pid)
    try:
        _until_zombie(member.pid)
        assert read_proc_stat(member.pid).pgrp == leader.pid
        assert group_live_members(leader.pid) == [leader.pid]
        leader.kill()
        _until_zombie(leader.pid)
        os.killpg(leader.pid, 0)  # the group is still there for a signal: two zombies
        assert group_live_members(leader.pid) == []
    finally:
        leader.kill()
        leader.wait()
        member.wait()
    code = (
        "import subprocess, time; from ptb_harness.runtime.procs import read_proc_stat, stop_leftovers\n"
        "z = subprocess.Popen(['true'], process_group=0)\n"
        "while not read_proc_stat(z.pid).zombie: time.sleep(0.01)\n"
        "print(z.pid, stop_leftovers(z.pid, grace_s=2))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    pid, signalled = out.stdout.split(" ", 1)
    # before: [-pid, pid] (SIGTERM to the group, the grace waited out, then its SIGKILL)
    assert signalled.strip() == f"[{pid}]"


def test_describe_says_how_a_process_ended():
    assert describe(ProcessResult("exited", 3, None, 0, 1)) == "exited with code 3"
    assert describe(ProcessResult("timeout", None, signal.SIGKILL, 0, 1)) == "stopped at its time limit (SIGKILL)"
    assert describe(ProcessResult("signal", None, signal.SIGSEGV, 0, 1)) == "killed by signal 11 (SIGSEGV)"


def test_pump_cuts_at_its_cap_and_says_so():
    src = ChunkedReader([b"line one\nline two\n", b"x" * 100_000, b"\nmore\n"])
    out = io.BytesIO()
    assert pump_timestamped(src, out, max_bytes=30) == 18 + 100_000 + 6
    text = out.getvalue().decode()
    lines = text.splitlines()
    assert lines[0].endswith("] line one") and lines[1].endswith("] line two") and lines[2].endswith("] " + "x" * 12)
    assert lines[3].endswith("] [harness] trace cut at 30 bytes; 99994 more bytes dropped") and len(lines) == 4


def _wakeups() -> int:
    """This thread's voluntary context switches: each time it blocked, or slept."""
    status = Path("/proc/thread-self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("voluntary_ctxt_switches")).split()[1])


def test_waiting_on_a_child_blocks_until_it_exits_without_polling():
    """exited_within blocks on the child's pidfd: waiting a second on a child that runs on
    wakes this thread once or twice, where Popen.wait(timeout) polls (some 20 sleeps a
    second); a child that exits is seen at once, reaped, its code read."""
    runner = subprocess.Popen(["/bin/sleep", "30"])
    quick = subprocess.Popen(["/bin/sh", "-c", "sleep 0.2; exit 7"])
    try:
        before = _wakeups()
        assert exited_within(runner, 1.0) is False
        assert _wakeups() - before <= 3
        t0 = time.monotonic()
        assert exited_within(quick, 30.0) is True
        assert time.monotonic() - t0 < 10 and quick.returncode == 7
        assert exited_within(quick, 0) is True  # already reaped: at once
    finally:
        for child in (runner, quick):
            child.kill()
            child.wait()
