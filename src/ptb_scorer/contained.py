"""Run model-written code contained: never in the scorer's own process.

Each program runs in a fresh temp dir, in its own process group, with a clean
environment and `python -I -S`, under a wall-clock timeout and setrlimit caps (address
space, CPU seconds, process count, file size, no core dumps). Where the runtime allows,
it also gets a network namespace of its own (no network), a PID namespace of its own (it
can signal or trace no process outside it, and everything it forks dies with it) and,
when the scorer runs as root, the unprivileged uid 65534 (as root RLIMIT_NPROC would not
hold). What applied is reported with each result, so a site without namespaces sees
"network:shared".

A small launcher (CHILD below) applies the limits after the fork and then execs the
program, so nothing unsafe runs between fork and exec in the (threaded) scorer. With a
PID namespace the launcher forks once more (the program is the namespace's first
process) and waits for it. What the program writes is read bounded (:class:`Pump`): a
program that floods its output costs the scorer no memory.

The verdict on model-written code is never the program's exit status (that, the program
controls): :mod:`ptb_scorer.proxied_check` decides HumanEval in a checker process.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

#: Runs in the child before the program: namespaces, limits, uid, then exec.
CHILD = r"""
import ctypes, json, os, resource, signal, sys
lim = json.loads(sys.argv[1])
applied = []
libc = ctypes.CDLL(None, use_errno=True)
NEWNET, NEWUSER, NEWPID = 0x40000000, 0x10000000, 0x20000000
def unshare(flags):
    for extra, note in ((0, ""), (NEWUSER, "(userns)")):
        if flags and libc.unshare(flags | extra) == 0:
            return note
    return None
want = (NEWNET if lim["no_network"] else 0) | (NEWPID if lim["own_pids"] else 0)
note = unshare(want)
if note is None and lim["own_pids"]:
    want &= ~NEWPID
    note = unshare(want)
if lim["no_network"]:
    applied.append("network:none" + note if note is not None else "network:shared")
if lim["own_pids"]:
    applied.append("pids:own" + note if note is not None and want & NEWPID else "pids:shared")
for name, value in (("RLIMIT_AS", lim["memory_bytes"]), ("RLIMIT_CPU", lim["cpu_seconds"]),
                    ("RLIMIT_NPROC", lim["nproc"]), ("RLIMIT_FSIZE", lim["file_bytes"]),
                    ("RLIMIT_CORE", 0)):
    resource.setrlimit(getattr(resource, name), (value, value))
if want & NEWPID:
    pid = os.fork()
    if pid:  # outside the namespace: wait, and end as the program ended
        os.closerange(0, 65536)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code & 0xFF)
if os.geteuid() == 0 and lim["drop_to"] is not None:
    try:
        os.setgroups([])
        os.setgid(lim["drop_to"])
        os.setuid(lim["drop_to"])
        applied.append("uid:%d" % lim["drop_to"])
    except OSError:
        applied.append("uid:shared")
if want & NEWPID:  # the launcher's death (the scorer's kill) ends the namespace, setsid or not
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: after setuid, which clears it
sys.stderr.write("PTB_CONTAINED " + ",".join(applied) + "\n")
sys.stderr.flush()
os.execv(sys.argv[2], [sys.argv[2], "-I", "-S", *lim["argv"]])
"""


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 30.0
    memory_bytes: int = 2 << 30
    cpu_seconds: int = 30
    #: processes (and threads) the program may have, on top of what its uid already runs
    nproc: int = 32
    file_bytes: int = 64 << 20
    no_network: bool = True
    #: a PID namespace of its own (the program can signal nothing outside it)
    own_pids: bool = True
    #: uid/gid to run as when the scorer is root (nobody); None keeps the scorer's
    drop_to: int | None = 65534


@dataclass
class Result:
    exit_code: int | None
    #: "exited", "timeout" or "killed by signal N"
    reason: str
    stdout: str
    stderr: str
    duration_s: float
    applied: list[str] = field(default_factory=list)


def _uid_tasks(uid: int) -> int:
    """Processes and threads the uid runs now (RLIMIT_NPROC counts them all)."""
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                st = os.stat(f"/proc/{pid}")
                if st.st_uid == uid:
                    n += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                continue
    return n


def _reachable_by_others(path: str) -> bool:
    """Every directory on the way is searchable and the file executable by 'other'."""
    p = os.path.realpath(path)
    try:
        if not os.stat(p).st_mode & 0o001:
            return False
        d = os.path.dirname(p)
        while d != "/":
            if not os.stat(d).st_mode & 0o001:
                return False
            d = os.path.dirname(d)
    except OSError:
        return False
    return True


def program_python(limits: Limits) -> str:
    """The interpreter programs run with: the scorer's own base interpreter (not a venv's
    link; programs get the standard library only, `-I -S`), or, when the dropped uid
    cannot reach it (e.g. a pyenv under /root), the system's python3."""
    own = os.path.realpath(sys.executable)
    if os.geteuid() != 0 or limits.drop_to is None or _reachable_by_others(own):
        return own
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if _reachable_by_others(cand):
            return os.path.realpath(cand)
    raise RuntimeError("no python interpreter the unprivileged uid can run (install python3 in /usr/bin)")


def _usable_base(limits: Limits) -> str:
    """Where contained programs' dirs go: the temp dir, or, when the dropped uid cannot
    reach it (a job dir made 0700 on the way), the system's /tmp or /var/tmp."""
    dropping = os.geteuid() == 0 and limits.drop_to is not None
    tried = (tempfile.gettempdir(), "/tmp", "/var/tmp")
    for base in tried:
        if not dropping or _reachable_by_others(base):
            return base
    raise RuntimeError(f"no temp dir that uid {limits.drop_to} can reach (tried {', '.join(tried)})")


def work_root(limits: Limits) -> str:
    """A fresh dir for one run's programs, under a base the dropped uid can reach: others
    may pass through it (0711) but not list it."""
    root = tempfile.mkdtemp(prefix="ptb-contained-", dir=_usable_base(limits))
    os.chmod(root, 0o711)
    return root


def work_dir(root: str, name: str, shared: bool) -> str:
    """``root``/name: writable by the dropped uid (`shared`), or the scorer's alone."""
    path = os.path.join(root, name)
    os.mkdir(path)
    os.chmod(path, 0o777 if shared else 0o700)
    return path


def start(
    program: str,
    args: Sequence[str],
    limits: Limits,
    work: str,
    *,
    stdin: Any = subprocess.DEVNULL,
    stdout: Any = subprocess.PIPE,
    stderr: Any = subprocess.PIPE,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen:
    """Start ``program`` (Python source, written to ``work``/program.py) with ``args``,
    contained by ``limits``, in ``work``, its own session and process group."""
    prog = os.path.join(work, "program.py")
    with open(prog, "w", encoding="utf-8") as f:
        f.write(program)
    os.chmod(prog, 0o644)
    dropping = os.geteuid() == 0 and limits.drop_to is not None
    uid = limits.drop_to if dropping else os.geteuid()
    lim = {
        "no_network": limits.no_network,
        "own_pids": limits.own_pids,
        "memory_bytes": limits.memory_bytes,
        "cpu_seconds": limits.cpu_seconds,
        "nproc": _uid_tasks(uid) + limits.nproc,  # type: ignore[arg-type]
        "file_bytes": limits.file_bytes,
        "drop_to": limits.drop_to,
        "argv": [prog, *args],
    }
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": work, "TMPDIR": work, "PYTHONHASHSEED": "0"}
    python = program_python(limits)
    return subprocess.Popen(
        [python, "-I", "-S", "-c", CHILD, json.dumps(lim), python],
        cwd=work,
        env=env,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        pass_fds=tuple(pass_fds),
        start_new_session=True,  # its own process group: one kill reaches its children
    )


def kill_group(proc: subprocess.Popen) -> None:
    """The program's group, whatever it left behind (a fork bomb's children too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class Pump:
    """Reads the given pipes (keeping the first ``head`` and last ``tail`` bytes of each,
    dropping the rest) and writes pending input, all in one thread, until a deadline."""

    def __init__(self, head: int = 4096, tail: int = 4096) -> None:
        self._sel = selectors.DefaultSelector()
        self._head, self._tail = head, tail
        self.kept: dict[int, tuple[bytearray, bytearray]] = {}
        self.dropped: dict[int, int] = {}

    def read(self, f: IO[bytes]) -> int:
        fd = f.fileno()
        os.set_blocking(fd, False)
        self.kept[fd] = (bytearray(), bytearray())
        self.dropped[fd] = 0
        self._sel.register(fd, selectors.EVENT_READ, None)
        return fd

    def write(self, f: IO[bytes], data: bytes) -> None:
        fd = f.fileno()
        os.set_blocking(fd, False)
        self._sel.register(fd, selectors.EVENT_WRITE, [memoryview(data), f])
        if not data:
            self._done(fd, f)

    def _done(self, fd: int, f: IO[bytes] | None = None) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(fd)
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()

    def _take(self, fd: int, chunk: bytes) -> None:
        head, tail = self.kept[fd]
        room = self._head - len(head)
        head += chunk[:room]
        rest = chunk[room:] if room > 0 else chunk
        tail += rest
        if len(tail) > self._tail:
            self.dropped[fd] += len(tail) - self._tail
            del tail[: len(tail) - self._tail]

    def open_reads(self) -> set[int]:
        return {k.fd for k in self._sel.get_map().values() if k.events & selectors.EVENT_READ}

    def run(self, deadline: float, until: set[int] | None = None) -> bool:
        """Pump until the pipes in ``until`` (default: all read pipes) reach EOF; False
        when the deadline came first."""
        wait_for = set(self.open_reads() if until is None else until)
        while wait_for & self.open_reads():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, _ in self._sel.select(timeout=min(left, 1.0)):
                if key.data is None:
                    try:
                        chunk = os.read(key.fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if chunk:
                        self._take(key.fd, chunk)
                    else:
                        self._done(key.fd)
                else:
                    self._send(key.fd, key.data)
        return True

    def _send(self, fd: int, pending: list) -> None:
        try:
            n = os.write(fd, pending[0])
        except BlockingIOError:
            return
        except OSError:  # the reader is gone
            self._done(fd, pending[1])
            return
        pending[0] = pending[0][n:]
        if not pending[0]:
            self._done(fd, pending[1])

    def text(self, fd: int) -> str:
        """What was kept of a pipe, with a mark where bytes were dropped."""
        head, tail = self.kept[fd]
        cut = f"\n[... {self.dropped[fd]} bytes dropped ...]\n" if self.dropped[fd] else ""
        return (bytes(head) + cut.encode() + bytes(tail)).decode("utf-8", "replace")

    def close(self) -> None:
        self._sel.close()


def split_applied(stderr: str) -> tuple[list[str], str]:
    """(what containment applied, the rest of stderr): the launcher's first line."""
    first, _, rest = stderr.partition("\n")
    if first.startswith("PTB_CONTAINED "):
        return [a for a in first.removeprefix("PTB_CONTAINED ").split(",") if a], rest
    return [], stderr


def run_python(code: str, limits: Limits = Limits()) -> Result:
    """Run ``code`` as a Python program under ``limits``: how it ended and what it printed
    (bounded). Its exit status is its own account, never a verdict on it."""
    root = work_root(limits)
    work = work_dir(root, "program", shared=True)
    start_t = time.monotonic()
    proc = start(code, [], limits, work)
    pump = Pump()
    out, err = pump.read(proc.stdout), pump.read(proc.stderr)  # type: ignore[arg-type]
    try:
        finished = pump.run(start_t + limits.timeout_s)
        if finished:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, start_t + limits.timeout_s - time.monotonic()))
    finally:
        kill_group(proc)
        proc.wait()
        pump.close()
        for f in (proc.stdout, proc.stderr):
            f.close()  # type: ignore[union-attr]
        shutil.rmtree(root, ignore_errors=True)
    code_ = proc.returncode
    timed_out = not finished or time.monotonic() - start_t > limits.timeout_s
    reason = "timeout" if timed_out else (f"killed by signal {-code_}" if code_ < 0 else "exited")
    applied, stderr = split_applied(pump.text(err))
    return Result(
        exit_code=code_,
        reason=reason,
        stdout=pump.text(out)[-4000:],
        stderr=stderr[-4000:],
        duration_s=round(time.monotonic() - start_t, 3),
        applied=applied,
    )
