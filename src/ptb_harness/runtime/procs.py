"""Run a child process under a wall-clock budget, and only ever signal what we started.

The child gets its own session (process group), so TERM/KILL on timeout reaches the
agent and everything it started, and nothing else. The calling process becomes a child
subreaper (Linux), so a daemon the agent double-forks out of its group is re-parented to
us and is stopped too when the cell ends, instead of holding the GPU or the output pipe.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Literal

from ptb_harness.core.errors import Interrupted

_PR_SET_CHILD_SUBREAPER = 36
#: how often a supervised child's ``stop`` event is looked at while it runs (a spent LLM
#: budget stops the agent within this)
STOP_POLL_S = 0.25

Status = Literal["exited", "timeout", "signal", "stopped"]


@dataclass(frozen=True)
class ProcessResult:
    """How a budgeted process ended.

    status: ``exited`` (ran to completion; ``exit_code`` is its real code), ``signal``
    (killed by a signal we did not send; ``signal`` says which), ``timeout`` (we
    stopped it at the budget; ``signal`` is the one that finally ended it) or
    ``stopped`` (we stopped it before its budget because its ``stop`` event was set,
    e.g. its LLM budget was spent; ``signal`` likewise).
    """

    status: Status
    exit_code: int | None
    signal: int | None
    started_at: float
    ended_at: float

    @property
    def duration_s(self) -> float:
        return self.ended_at - self.started_at


def describe(result: ProcessResult) -> str:
    """How the process ended, in words: for records and logs."""
    if result.status == "exited":
        return f"exited with code {result.exit_code}"
    name = signal.Signals(result.signal).name if result.signal else "?"
    if result.status == "timeout":
        return f"stopped at its time limit ({name})"
    if result.status == "stopped":
        return f"stopped by the harness ({name})"
    return f"killed by signal {result.signal} ({name})"


def utc_stamp(t: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if t is None else t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_utc(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def pump_timestamped(src: BinaryIO, dst: BinaryIO, max_bytes: int | None = None) -> int:
    """Copy src to dst, prefixing every line with ``[YYYY-MM-DDTHH:MM:SSZ] `` (UTC).

    Works on bytes, so binary output and invalid UTF-8 pass through untouched; a line
    split across reads gets one prefix; each read is flushed so a crash loses nothing.
    After ``max_bytes`` read, the rest is read and dropped (the child never blocks on a
    full pipe) and one line at the end says how much was cut. Returns the bytes read.
    """
    at_line_start = True
    total = 0
    read = getattr(src, "read1", src.read)
    while True:
        chunk = read(65536)
        if not chunk:
            break
        cut = max_bytes is not None and total + len(chunk) > max_bytes
        dropped = 0
        if cut:
            keep = max(0, max_bytes - total)  # type: ignore[operator]
            chunk, dropped = chunk[:keep], len(chunk) - keep
        total += len(chunk)
        stamp = f"[{utc_stamp()}] ".encode()
        out = bytearray()
        lines = chunk.split(b"\n")
        for i, part in enumerate(lines):
            last = i == len(lines) - 1
            if last and not part:
                break
            if at_line_start:
                out += stamp
            out += part
            if last:
                at_line_start = False
            else:
                out += b"\n"
                at_line_start = True
        if cut:
            while more := read(1 << 20):
                dropped += len(more)
            out += b"" if at_line_start else b"\n"
            out += stamp + f"[harness] trace cut at {max_bytes} bytes; {dropped} more bytes dropped\n".encode()
            dst.write(out)
            dst.flush()
            return total + dropped
        dst.write(out)
        dst.flush()
    return total


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/PID/stat the harness uses."""

    pid: int
    state: str  # R, S, D, Z (zombie), T, ...
    ppid: int
    start_ticks: int  # start time in clock ticks since boot (tells a pid from its reuse)
    session: int = 0  # the session id (the agent's session groups every process it started)
    pgrp: int = 0  # the process group id
    cpu_ticks: int = 0  # user + system CPU time in clock ticks (its threads', not its children's)

    @property
    def zombie(self) -> bool:
        return self.state == "Z"

    @property
    def cpu_seconds(self) -> float:
        """The CPU time it has used (user + system), in seconds."""
        return self.cpu_ticks / os.sysconf("SC_CLK_TCK")


def read_proc_stat(pid: int | str) -> ProcStat | None:
    """/proc/PID/stat, parsed; None when the process is gone or /proc does not show it.

    The one reader of that file in the harness: the command name (field 2) may hold
    spaces and ')', so the fields are split after the last ')'.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        return ProcStat(
            int(pid), fields[0].decode(), int(fields[1]), int(fields[19]), int(fields[3]), int(fields[2]), ticks
        )
    except (IndexError, ValueError):
        return None


def process_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (tells a pid from its reuse)."""
    stat = read_proc_stat(pid)
    return stat.start_ticks if stat is not None else None


def _proc_stats() -> list[ProcStat] | None:
    """Every process /proc shows; None where /proc cannot be listed."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    stats = (read_proc_stat(name) for name in entries if name.isdigit())
    return [s for s in stats if s is not None]


def _children_of(pid: int) -> list[int]:
    """PIDs whose parent is ``pid`` (from /proc; empty where /proc is absent)."""
    return [s.pid for s in _proc_stats() or () if s.ppid == pid]


def group_live_members(pgid: int) -> list[int] | None:
    """The PIDs of the process group's members that are not zombies; None where /proc
    cannot be listed. A zombie is dead: no signal moves it, only its parent's wait (ours,
    for the orphans stop_leftovers reaps) removes it."""
    stats = _proc_stats()
    return None if stats is None else [s.pid for s in stats if s.pgrp == pgid and not s.zombie]


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _group_alive(pgid: int) -> bool:
    """Whether the group has a member that is not a zombie (a signal reaches zombies too:
    a group of our own unreaped zombie children would otherwise count as alive until the
    stop's grace ran out). Alive where /proc cannot tell."""
    if not _signal_group(pgid, 0):
        return False
    live = group_live_members(pgid)
    return live is None or bool(live)


def _group_gone_within(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def exited_within(proc: subprocess.Popen, timeout: float) -> bool:
    """Whether the child exited within ``timeout`` seconds (reaped if so), blocked on its
    pidfd until it exits: ``Popen.wait(timeout)`` polls every 50 ms instead, which beside a
    ten-hour agent is 720,000 wake-ups for nothing."""
    if proc.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(proc.pid)  # the pid is not reaped yet: it is still the child's
    except OSError:  # no pidfd (Linux before 5.3): Popen's own polling
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        select.select([fd], [], [], max(timeout, 0.0))
    finally:
        os.close(fd)
    return proc.poll() is not None


def _exits_within(proc: subprocess.Popen) -> Callable[[float], bool]:
    return lambda timeout: exited_within(proc, timeout)


def term_then_kill(pgid: int, grace_s: float, gone_within: Callable[[float], bool]) -> int:
    """The one stop sequence: SIGTERM to the process group, up to ``grace_s`` for it to
    go (``gone_within(timeout)`` says whether it did), then SIGKILL. Returns the last
    signal sent."""
    _signal_group(pgid, signal.SIGTERM)
    if gone_within(grace_s):
        return signal.SIGTERM
    _signal_group(pgid, signal.SIGKILL)
    return signal.SIGKILL


def stop_leftovers(pgid: int, grace_s: float, exclude: Sequence[int] = ()) -> list[int]:
    """Stop what the finished child left behind: its process group, then orphans
    re-parented to us. Only processes descended from our child can be in either set.

    Returns the PIDs that were signalled.
    """
    signalled: list[int] = []
    if _group_alive(pgid):
        signalled.append(-pgid)
        term_then_kill(pgid, grace_s, lambda timeout: _group_gone_within(pgid, timeout))
    me = os.getpid()
    for _ in range(50):  # orphans may fork while we kill: repeat until none is left
        orphans = [p for p in _children_of(me) if p not in exclude]
        if not orphans:
            break
        for p in orphans:
            try:
                os.kill(p, signal.SIGKILL)
                signalled.append(p)
            except ProcessLookupError:
                pass
        for p in orphans:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(p, 0)
    return signalled


class _Terminated(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(f"received signal {signum}")
        self.signum = signum


class _StopSignals:
    """SIGTERM/SIGINT/SIGHUP (the workflow manager stopping the job) raise _Terminated
    once ``arm()`` is called; one that arrives before, while the child is being started,
    is held until then (raised inside Popen it would leave the started child unstopped)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __init__(self) -> None:
        self.pending: list[int] = []
        self.armed = False
        self.previous = {s: signal.signal(s, self._on_signal) for s in self.SIGNALS}

    def _on_signal(self, signum: int, _frame: object) -> None:
        if not self.armed:
            self.pending.append(signum)
            return
        raise _Terminated(signum)

    def arm(self) -> None:
        self.armed = True
        if self.pending:
            raise _Terminated(self.pending[0])

    def restore(self) -> None:
        for s, h in self.previous.items():
            signal.signal(s, h)


def _wait_for(proc: subprocess.Popen, budget_s: float, stop: threading.Event | None) -> Status | None:
    """Wait for the child to exit (None), its budget to pass ("timeout") or ``stop`` to be
    set ("stopped"), whichever comes first."""
    deadline = time.monotonic() + budget_s
    while (left := deadline - time.monotonic()) > 0:
        if exited_within(proc, left if stop is None else min(left, STOP_POLL_S)):
            return None
        if stop is not None and stop.is_set():
            return "stopped"
    return None if proc.poll() is not None else "timeout"


def run_budgeted(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | Path,
    output: str | Path,
    budget_s: float,
    kill_grace_s: float,
    timestamps: bool = True,
    output_mode: int = 0o600,
    append: bool = False,
    on_start: Callable[[int], None] | None = None,
    max_output_bytes: int | None = None,
    stop: threading.Event | None = None,
    spare: Sequence[int] = (),
) -> ProcessResult:
    """Run argv with stdout+stderr merged into ``output`` (created with output_mode).

    At ``budget_s``, or as soon as ``stop`` is set (status ``stopped``), the child's
    process group gets SIGTERM, and SIGKILL after ``kill_grace_s``. ``spare``: children
    of this process that are not the agent's leftovers (the cell's LLM gateway). If this
    process receives SIGTERM/SIGINT/SIGHUP meanwhile (the workflow manager is stopping
    the job), the child's group is stopped the same way and
    the signal is re-raised as Interrupted (a SystemExit) after the child is gone.
    """
    become_subreaper()
    out_f = _open_output(Path(output), append, output_mode)
    guard = _StopSignals()
    started = time.time()
    proc = subprocess.Popen(
        list(argv),
        env=dict(env),
        cwd=str(cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if timestamps else out_f,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    pgid = proc.pid  # start_new_session: the child leads its own group
    if on_start is not None:
        on_start(proc.pid)
    pump = _start_pump(proc, out_f, max_output_bytes) if timestamps else None
    try:
        how = _supervise(proc, pgid, guard, budget_s, kill_grace_s, stop)
    finally:
        guard.restore()
        ended = time.time()
        stop_leftovers(pgid, grace_s=min(kill_grace_s, 5.0), exclude=spare)
        if pump is not None:
            pump.join(timeout=30)
        out_f.close()
    return _result(proc, how, started, ended)


def _open_output(output: Path, append: bool, mode: int) -> BinaryIO:
    """The child's output file; append: a resumed session's output follows the earlier
    turns in the same trace."""
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC), mode)
    return os.fdopen(fd, "wb")


def _start_pump(proc: subprocess.Popen, out_f: BinaryIO, max_output_bytes: int | None) -> threading.Thread:
    """The thread that copies the child's output to out_f, each line timestamped."""
    assert proc.stdout is not None
    pump = threading.Thread(target=pump_timestamped, args=(proc.stdout, out_f, max_output_bytes), daemon=True)
    pump.start()
    return pump


@dataclass
class _Supervised:
    """How the wait for a child ended: on its own (all None), at its budget or stop
    (``ended_by``, and the signal that finally ended it), or by a signal to us."""

    ended_by: Status | None = None
    final_signal: int | None = None
    interrupted: _Terminated | None = None


def _supervise(
    proc: subprocess.Popen,
    pgid: int,
    guard: _StopSignals,
    budget_s: float,
    kill_grace_s: float,
    stop: threading.Event | None,
) -> _Supervised:
    """Wait for the child; at its budget or stop, or when we are signalled, stop its group."""
    how = _Supervised()
    try:
        guard.arm()
        how.ended_by = _wait_for(proc, budget_s, stop)
        if how.ended_by is not None:
            how.final_signal = term_then_kill(pgid, kill_grace_s, _exits_within(proc))
            proc.wait()
    except _Terminated as e:
        how.interrupted = e
        term_then_kill(pgid, kill_grace_s, _exits_within(proc))
        proc.wait()
    return how


def _result(proc: subprocess.Popen, how: _Supervised, started: float, ended: float) -> ProcessResult:
    """The child's ProcessResult; a signal to us is re-raised as Interrupted, now that the
    child is gone."""
    if how.interrupted is not None:
        raise Interrupted(how.interrupted.signum)
    if how.ended_by is not None:
        return ProcessResult(how.ended_by, None, how.final_signal, started, ended)
    rc = proc.returncode
    return (
        ProcessResult("signal", None, -rc, started, ended)
        if rc < 0
        else ProcessResult("exited", rc, None, started, ended)
    )
