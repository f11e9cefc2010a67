"""One attempt per cell, enforced: every solve of a cell is counted in
`<cell>/solve.attempts.json`, a record Snakemake never deletes (it is no rule's output).

An agent that kills the harness (or a node that dies) leaves a solve without a record; a
rerun would solve the cell again and give the agent a second try. So a new attempt
starts only when no process of any earlier one can still live (its harness process, the
agent's session, anything whose working directory is the earlier job dir; its Slurm job),
and it is recorded as attempt N with the earlier attempts' evidence; the leaderboard
marks cells solved more than once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ptb_harness.core.cell_files import ATTEMPTS
from ptb_harness.core.errors import HarnessError
from ptb_harness.core.records import atomic_write_json, read_json_dict
from ptb_harness.runtime.procs import iso_utc, process_start_ticks, read_proc_stat
from ptb_harness.runtime.scheduler import live_slurm_jobs, scheduler_job

#: Set (to the cell's dir) to start a new attempt although an earlier one cannot be
#: verified as gone from here (another host, no scheduler to ask).
FORCE_ENV = "PTB_EARLIER_ATTEMPT_GONE"


def _survivors(entry: Mapping[str, Any]) -> list[int]:
    """PIDs on this host that belong to the attempt: its harness process (same start
    time), the agent's session, or anything working in its job dir."""
    found = []
    harness = entry.get("harness_pid")
    if isinstance(harness, int) and process_start_ticks(harness) == entry.get("harness_pid_start_ticks"):
        found.append(harness)
    session = entry.get("agent_pid")
    job_dir = entry.get("job_dir")
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        proc = read_proc_stat(name)
        if proc is None or proc.zombie:  # gone, or a zombie: it runs nothing any more
            continue
        if isinstance(session, int) and proc.session == session:
            found.append(int(name))
            continue
        if isinstance(job_dir, str):
            with contextlib.suppress(OSError):
                cwd = os.readlink(f"/proc/{name}/cwd")
                if cwd == job_dir or cwd.startswith(job_dir + "/"):
                    found.append(int(name))
    return sorted(set(found))


def may_live(entry: Mapping[str, Any], slurm_jobs: Callable[[], set[str] | None] = live_slurm_jobs) -> str | None:
    """How an unfinished earlier attempt may still run, or None when it surely does not."""
    job = (entry.get("scheduler") or {}).get("SLURM_JOB_ID")
    if job:
        live = slurm_jobs()
        if live is not None and str(job) in live:
            return f"its Slurm job {job} is still in the queue"
        if live is not None:
            return None
    if entry.get("host") != socket.gethostname():
        return f"it ran on {entry.get('host', '?')} and cannot be checked from here"
    pids = _survivors(entry)
    if pids:
        return f"its processes still run (pids {' '.join(map(str, pids[:10]))})"
    return None


def read_attempts(cell_dir: Path) -> list[dict[str, Any]]:
    data = read_json_dict(cell_dir / ATTEMPTS) or {}
    attempts = data.get("attempts")
    return [a for a in attempts if isinstance(a, dict)] if isinstance(attempts, list) else []


def _write(cell_dir: Path, attempts: list[dict[str, Any]]) -> None:
    atomic_write_json(cell_dir / ATTEMPTS, {"attempts": attempts})


def begin_attempt(cell_dir: Path, host_env: Mapping[str, str]) -> dict[str, Any]:
    """Record a new attempt and return it; HarnessError when an earlier unfinished one may
    still run."""
    attempts = read_attempts(cell_dir)
    forced = host_env.get(FORCE_ENV) == str(cell_dir)
    for a in attempts:
        if a.get("ended_at"):
            continue
        why = may_live(a)
        if why and not forced:
            raise HarnessError(
                f"attempt {a.get('n', '?')} of this cell (started {a.get('started_at', '?')} on "
                f"{a.get('host', '?')}) ended without a record and {why}; not solving it again while it may run. "
                f"Stop it, then rerun (or set {FORCE_ENV}={cell_dir} if you know it is gone)"
            )
        a["ended_at"] = iso_utc(time.time())
        if a.get("status") != "agent not started":
            a["status"] = "died without a record"
        if isinstance(a.get("job_dir"), str):  # the dead attempt's scratch, left behind
            shutil.rmtree(a["job_dir"], ignore_errors=True)
    entry: dict[str, Any] = {
        "n": len(attempts) + 1,
        "started_at": iso_utc(time.time()),
        "host": socket.gethostname(),
        "harness_pid": os.getpid(),
        "harness_pid_start_ticks": process_start_ticks(os.getpid()),
        "scheduler": scheduler_job(host_env),
        # until the agent's process starts: a try that dies before gave the agent nothing
        "status": "agent not started",
    }
    attempts.append(entry)
    _write(cell_dir, attempts)
    return entry


def update_attempt(cell_dir: Path, n: int, **fields: Any) -> None:
    """Add facts to attempt n (the job dir, the agent's pid, how it ended)."""
    attempts = read_attempts(cell_dir)
    for a in attempts:
        if a.get("n") == n:
            a.update(fields)
    with contextlib.suppress(OSError):  # a record of the attempt must not fail the stage
        _write(cell_dir, attempts)


def earlier_attempts(cell_dir: Path, n: int) -> list[dict[str, Any]]:
    """The evidence of the attempts before n in which the agent ran (or may have: those
    that died without a record), for solve.json; a try whose agent never started (a
    failed CUDA preflight) gave the agent nothing and is left out."""
    keys = ("n", "started_at", "ended_at", "host", "harness_pid", "agent_pid", "status", "failure", "scheduler")
    return [
        {k: a.get(k) for k in keys}
        for a in read_attempts(cell_dir)
        if isinstance(a.get("n"), int) and a["n"] < n and a.get("status") != "agent not started"
    ]
