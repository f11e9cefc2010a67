"""Reaping: kill leftover processes on the cell's GPUs before a scoring attempt, and
only there (and, in `own` mode, only ours).

Upstream killed every compute process on every GPU before each scoring attempt
(`nvidia-smi --query-compute-apps=pid | xargs kill -9`) and so killed other tenants'
jobs on shared nodes. Here the choice of victims is one pure function,
``choose_victims``, which sees the GPU set and the owner of every process, and is
property-tested; ``reap`` (the entry) only gathers its inputs and carries out its answer.
``ReapPolicy`` is the site's reap settings; it lives here, not in the campaign's
settings, because the GPU layer is below the campaign. Its modes, scopes and defaults
are the schema's (``site.gpu_reap``, ``site.gpu_scope``, ``site.reap_wait_seconds``), read
through ``core.schema``, so they are written once.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ptb_harness.core.errors import HarnessError
from ptb_harness.core.schema import site_knob
from ptb_harness.gpu.cellset import GpuSet
from ptb_harness.gpu.nvml import Gpu, GpuProcess, Owner, list_gpus, list_processes, load_nvml, proc_owner
from ptb_harness.runtime.procs import read_proc_stat

log = logging.getLogger("ptb_harness.gpu")

_MODE, _SCOPE, _WAIT = site_knob("gpu_reap"), site_knob("gpu_scope"), site_knob("reap_wait_seconds")
#: what to kill (site.gpu_reap) and on which GPUs (site.gpu_scope), as the schema lists them
REAP_MODES: tuple[str, ...] = tuple(_MODE["enum"])
REAP_SCOPES: tuple[str, ...] = tuple(_SCOPE["enum"])


def check_mode(mode: str) -> None:
    """An unknown mode is an error wherever it turns up, whatever is on the GPUs."""
    if mode not in REAP_MODES:
        raise HarnessError(f"unknown reap mode {mode!r} (one of {', '.join(REAP_MODES)})")


@dataclass(frozen=True)
class ReapPolicy:
    """The site's reap settings (site.gpu_reap, site.gpu_scope, site.reap_wait_seconds)."""

    mode: str = _MODE["default"]
    scope: str = _SCOPE["default"]
    wait_seconds: float = float(_WAIT["default"])

    def __post_init__(self) -> None:
        check_mode(self.mode)
        if self.scope not in REAP_SCOPES:
            raise HarnessError(f"unknown GPU scope {self.scope!r} (one of {', '.join(REAP_SCOPES)})")
        if not self.wait_seconds >= 0:
            raise HarnessError(f"reap wait_seconds must be >= 0, not {self.wait_seconds!r}")


@dataclass(frozen=True)
class ReapHost:
    """What ``reap`` touches on this machine; tests pass stand-ins for each."""

    nvml: Any | None = None  # None: pynvml, where the GPU set saw a driver
    uid: int | None = None  # whose processes `own` means; None: this process's user
    kill: Callable[[int, int], None] = os.kill
    owner: Callable[[int], Owner] = proc_owner
    poll_s: float = 0.2


@dataclass
class ReapReport:
    mode: str
    scope: list[str]
    victims: list[GpuProcess]
    killed: list[int] = field(default_factory=list)
    survivors: list[int] = field(default_factory=list)
    note: str = ""


def choose_victims(
    processes: Sequence[GpuProcess],
    scope: Sequence[str],
    mode: str,
    my_uid: int,
    protected_pids: frozenset[int] = frozenset(),
) -> list[GpuProcess]:
    """The processes to kill: on a GPU in ``scope`` (UUIDs), not protected, and in `own`
    mode owned by ``my_uid`` (an unknown owner is never ours)."""
    check_mode(mode)
    if mode == "none":
        return []
    in_scope = {u.lower() for u in scope}
    victims = []
    seen: set[int] = set()
    for p in processes:
        if p.gpu_uuid.lower() not in in_scope or p.pid in protected_pids or p.pid in seen:
            continue
        if mode == "own" and p.uid != my_uid:
            continue
        victims.append(p)
        seen.add(p.pid)
    return victims


def _gone(pid: int) -> bool:
    """No such process, or a zombie: it has exited and holds no GPU memory."""
    stat = read_proc_stat(pid)
    return stat is None or stat.zombie


def _ancestors(pid: int) -> set[int]:
    """pid and its ancestors: never candidates, even if they hold a CUDA context."""
    out = {pid}
    while pid > 1 and (stat := read_proc_stat(pid)) is not None and stat.ppid > 0:
        pid = stat.ppid
        out.add(pid)
    return out


def _targets(gpu_set: GpuSet, policy: ReapPolicy, nvml: Any) -> list[Gpu]:
    """The GPUs reap may touch. An unknown set is never widened to the node's GPUs."""
    if policy.scope == "node":
        return list_gpus(nvml)
    if gpu_set.request.known:
        return list(gpu_set.gpus)
    if policy.mode == "all":
        raise HarnessError(
            "reap mode all needs the cell's GPU set, but no scheduler or CUDA variable names it"
            " (set site.gpu_scope: node only for whole-node claims)"
        )
    return []


def _kill(victims: Sequence[GpuProcess], kill: Callable[[int, int], None]) -> list[int]:
    killed = []
    for v in victims:
        try:
            kill(v.pid, signal.SIGKILL)
            killed.append(v.pid)
            log.warning("reap killed %s", v.describe())
        except ProcessLookupError:
            log.info("reap: pid %d already gone", v.pid)
        except PermissionError:
            log.error("reap: not permitted to kill %s", v.describe())
    return killed


def _wait_gone(killed: Sequence[int], nvml: Any, targets: Sequence[Gpu], host: ReapHost, wait_s: float) -> list[int]:
    """The killed PIDs still on the GPUs (or alive) after at most ``wait_s`` seconds."""
    deadline = time.monotonic() + wait_s
    pending = set(killed)
    while pending and time.monotonic() < deadline:
        on_gpu = {p.pid for p in list_processes(nvml, targets, host.owner)}
        pending = {p for p in pending if p in on_gpu or not _gone(p)}
        if pending:
            time.sleep(host.poll_s)
    if pending:
        log.error("reap: still on the GPU after %.0f s: %s", wait_s, sorted(pending))
    return sorted(pending)


def reap(gpu_set: GpuSet, policy: ReapPolicy, *, dry_run: bool = False, host: ReapHost | None = None) -> ReapReport:
    """Kill the processes ``choose_victims`` picks, then wait (bounded) until they are
    gone from the GPUs. Every kill is logged with pid, user, GPU, memory and command."""
    check_mode(policy.mode)
    host = host or ReapHost()
    if policy.mode == "none":
        return ReapReport(policy.mode, [], [], note="reap mode none: nothing done")
    nvml = host.nvml if host.nvml is not None else (load_nvml() if gpu_set.driver else None)
    if nvml is None:
        return ReapReport(policy.mode, [], [], note="no NVIDIA driver: nothing to reap")
    targets = _targets(gpu_set, policy, nvml)
    if not targets:
        return ReapReport(policy.mode, [], [], note="the cell has no GPUs: nothing to reap")
    uuids = [g.uuid for g in targets]
    uid = os.getuid() if host.uid is None else host.uid
    processes = list_processes(nvml, targets, host.owner)
    victims = choose_victims(processes, uuids, policy.mode, uid, frozenset(_ancestors(os.getpid())))
    report = ReapReport(policy.mode, uuids, victims)
    if dry_run:
        for v in victims:
            log.info("reap (dry run) would kill %s", v.describe())
        return report
    report.killed = _kill(victims, host.kill)
    if report.killed:
        report.survivors = _wait_gone(report.killed, nvml, targets, host, policy.wait_seconds)
    return report
