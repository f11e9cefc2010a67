"""Run model-written code contained: never in the scorer's own process.

Each program runs in a fresh temp dir, in its own process group, with a clean
environment and `python -I`, under a wall-clock timeout and setrlimit caps (address
space, CPU seconds, process count, file size, no core dumps). Where the runtime allows,
it also gets a network namespace of its own (no network) and, when the scorer runs as
root, the unprivileged uid 65534 (as root RLIMIT_NPROC would not hold). What applied is
reported with each result, so a site without namespaces sees "network: shared".

A small launcher (CHILD below) applies the limits after the fork and then execs the
program, so nothing unsafe runs between fork and exec in the (threaded) scorer.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

#: Runs in the child before the program: network namespace, limits, uid, then exec.
CHILD = r"""
import ctypes, json, os, resource, sys
lim = json.loads(sys.argv[1])
applied = []
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000
if lim["no_network"]:
    if libc.unshare(CLONE_NEWNET) == 0:
        applied.append("network:none")
    elif libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
        applied.append("network:none(userns)")
    else:
        applied.append("network:shared")
for name, value in (("RLIMIT_AS", lim["memory_bytes"]), ("RLIMIT_CPU", lim["cpu_seconds"]),
                    ("RLIMIT_NPROC", lim["nproc"]), ("RLIMIT_FSIZE", lim["file_bytes"]),
                    ("RLIMIT_CORE", 0)):
    resource.setrlimit(getattr(resource, name), (value, value))
if os.geteuid() == 0 and lim["drop_to"] is not None:
    os.setgroups([])
    os.setgid(lim["drop_to"])
    os.setuid(lim["drop_to"])
    applied.append("uid:%d" % lim["drop_to"])
sys.stderr.write("PTB_CONTAINED " + ",".join(applied) + "\n")
sys.stderr.flush()
os.execv(sys.argv[3], [sys.argv[3], "-I", "-S", sys.argv[2]])
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
    #: uid/gid to run as when the scorer is root (nobody); None keeps root
    drop_to: int | None = 65534


@dataclass
class Result:
    passed: bool
    exit_code: int | None
    #: "ok", "failed", "timeout" or "killed by signal N"
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


def run_python(code: str, limits: Limits = Limits()) -> Result:
    """Run ``code`` as a Python program under ``limits``; passed means exit status 0."""
    work = tempfile.mkdtemp(prefix="ptb-contained-")
    os.chmod(work, 0o777)  # the dropped uid writes here
    prog = os.path.join(work, "program.py")
    with open(prog, "w", encoding="utf-8") as f:
        f.write(code)
    os.chmod(prog, 0o644)
    uid = limits.drop_to if os.geteuid() == 0 and limits.drop_to is not None else os.geteuid()
    lim = {
        "no_network": limits.no_network,
        "memory_bytes": limits.memory_bytes,
        "cpu_seconds": limits.cpu_seconds,
        "nproc": _uid_tasks(uid) + limits.nproc,
        "file_bytes": limits.file_bytes,
        "drop_to": limits.drop_to,
    }
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": work, "TMPDIR": work, "PYTHONHASHSEED": "0"}
    python = program_python(limits)
    start = time.monotonic()
    proc = subprocess.Popen(
        [python, "-I", "-S", "-c", CHILD, json.dumps(lim), prog, python],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: one kill reaches its children
    )
    try:
        out, err = proc.communicate(timeout=limits.timeout_s)
        reason = None
    except subprocess.TimeoutExpired:
        reason = "timeout"
        out, err = b"", b""
    finally:
        # the program's group, whatever it left behind (a fork bomb's children too)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if reason == "timeout":
            out, err = proc.communicate()
        shutil.rmtree(work, ignore_errors=True)
    duration = time.monotonic() - start
    stderr = err.decode("utf-8", "replace")
    applied = []
    for line in stderr.splitlines():
        if line.startswith("PTB_CONTAINED "):
            applied = [a for a in line.removeprefix("PTB_CONTAINED ").split(",") if a]
            stderr = stderr.replace(line + "\n", "", 1)
            break
    code_ = proc.returncode
    if reason is None:
        reason = "ok" if code_ == 0 else (f"killed by signal {-code_}" if code_ < 0 else "failed")
    return Result(
        passed=reason == "ok",
        exit_code=code_,
        reason=reason,
        stdout=out.decode("utf-8", "replace")[-4000:],
        stderr=stderr[-4000:],
        duration_s=round(duration, 3),
        applied=applied,
    )
