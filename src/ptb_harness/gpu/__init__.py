"""The cell's GPUs, on NVML: which cards are the cell's, who runs on them, and reaping
that can only ever touch processes on those cards (and, in `own` mode, only ours).

Upstream killed every compute process on every GPU before each scoring attempt
(`nvidia-smi --query-compute-apps=pid | xargs kill -9`) and so killed other tenants'
jobs on shared nodes. Here the choice of victims is one pure function,
``choose_victims``, which sees the GPU set and the owner of every process, and is
property-tested; everything else only gathers its inputs or carries out its answer.

NVML is reached through an injectable module (``pynvml`` by default) so the logic is
tested against a stand-in; on a machine without NVIDIA drivers every function degrades
to "no GPUs".
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ptb_harness.core.errors import HarnessError

log = logging.getLogger("ptb_harness.gpu")

ReapMode = Literal["none", "own", "all"]

#: Where a job's GPU ids come from, in order of precedence.
GPU_ENV_SOURCES = (
    "SLURM_STEP_GPUS",
    "SLURM_JOB_GPUS",
    "_CONDOR_AssignedGPUs",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
)
#: Values that mean "this job has no GPU" (HTCondor's 10000, NoDevFiles; none; empty).
NO_GPU_VALUES = frozenset({"", "none", "nodevfiles", "10000", "void"})


@dataclass(frozen=True)
class GpuRequest:
    """The GPU ids a job was given, and where they came from. ``ids is None``: unknown."""

    source: str
    ids: tuple[str, ...] | None

    @property
    def known(self) -> bool:
        return self.ids is not None


def _split_ids(value: str) -> tuple[str, ...]:
    if value.strip().lower() in NO_GPU_VALUES:
        return ()
    ids = tuple(p.strip() for p in value.replace(" ", ",").split(",") if p.strip())
    return tuple(i for i in ids if i.lower() not in NO_GPU_VALUES)


def requested_gpus(env: Mapping[str, str], explicit: str | None = None) -> GpuRequest:
    """The job's GPU ids: an explicit setting, then the scheduler's variables, then CUDA's."""
    if explicit is not None:
        return GpuRequest("site.gpu_ids", _split_ids(str(explicit)))
    for name in GPU_ENV_SOURCES:
        # `all` (container runtimes) names no particular set: look further
        if name in env and env[name].strip().lower() != "all":
            return GpuRequest(name, _split_ids(env[name]))
    return GpuRequest("none set", None)


@dataclass(frozen=True)
class Gpu:
    index: int  # NVML index of the (parent) device
    uuid: str
    name: str = ""
    mig: bool = False  # a MIG instance, addressed by its own UUID only


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    gpu_uuid: str
    gpu_index: int
    used_memory: int | None  # bytes; None when NVML cannot tell
    uid: int | None  # owner; None when /proc does not show it (another PID namespace)
    user: str
    cmdline: str

    def describe(self) -> str:
        mem = "?" if self.used_memory is None else f"{self.used_memory / 2**20:.0f} MiB"
        return f"pid {self.pid} user {self.user} gpu {self.gpu_index} ({self.gpu_uuid}) mem {mem} cmd {self.cmdline!r}"


def resolve_ids(ids: Sequence[str], gpus: Sequence[Gpu]) -> list[Gpu]:
    """Map job GPU ids to devices: an index, `CUDA<n>`, a full `GPU-`/`MIG-` UUID or a
    unique UUID prefix (HTCondor's short ids). Unknown or ambiguous ids are an error."""
    by_index = {g.index: g for g in gpus if not g.mig}
    chosen: list[Gpu] = []
    for raw in ids:
        key = raw.strip()
        index: int | None = None
        if key.isdigit():
            index = int(key)
        elif key.upper().startswith("CUDA") and key[4:].isdigit():
            index = int(key[4:])
        if index is not None:
            if index not in by_index:
                raise HarnessError(f"GPU id {raw!r}: no GPU with index {index} (have {sorted(by_index)})")
            gpu = by_index[index]
        else:
            exact = [g for g in gpus if g.uuid.lower() == key.lower()]
            matches = exact or [g for g in gpus if g.uuid.lower().startswith(key.lower())]
            if not matches:
                raise HarnessError(f"GPU id {raw!r}: no GPU has this UUID")
            if len(matches) > 1:
                raise HarnessError(f"GPU id {raw!r}: ambiguous, matches {', '.join(g.uuid for g in matches)}")
            gpu = matches[0]
        if gpu not in chosen:
            chosen.append(gpu)
    return chosen


def choose_victims(
    processes: Sequence[GpuProcess],
    scope: Sequence[str],
    mode: ReapMode,
    my_uid: int,
    protected_pids: frozenset[int] = frozenset(),
) -> list[GpuProcess]:
    """The processes to kill: on a GPU in ``scope`` (UUIDs), not protected, and in `own`
    mode owned by ``my_uid`` (an unknown owner is never ours)."""
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
        if mode not in ("own", "all"):
            raise ValueError(f"unknown reap mode {mode!r}")
        victims.append(p)
        seen.add(p.pid)
    return victims


# -- NVML access --------------------------------------------------------------------------


def load_nvml() -> Any | None:
    """The initialised pynvml module, or None where there is no NVIDIA driver."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def list_gpus(nvml: Any) -> list[Gpu]:
    gpus = []
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        gpus.append(Gpu(i, _text(nvml.nvmlDeviceGetUUID(h)), _text(nvml.nvmlDeviceGetName(h))))
        # MIG instances are addressable by their own UUIDs
        try:
            count = nvml.nvmlDeviceGetMaxMigDeviceCount(h)
        except Exception:  # not MIG-capable, or not supported by the driver
            count = 0
        for m in range(count):
            try:
                mh = nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, m)
            except Exception:  # slot not populated
                continue
            gpus.append(Gpu(i, _text(nvml.nvmlDeviceGetUUID(mh)), "MIG instance", mig=True))
    return gpus


def _handle(nvml: Any, gpu: Gpu) -> Any:
    return nvml.nvmlDeviceGetHandleByUUID(gpu.uuid.encode() if isinstance(gpu.uuid, str) else gpu.uuid)


def proc_owner(pid: int) -> tuple[int | None, str, str]:
    """(uid, user name, command line) of a PID from /proc; uid None if not visible."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None, "?", "?"
    try:
        import pwd

        user = pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        user = str(uid)
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = "?"
    return uid, user, cmd[:200]


def list_processes(
    nvml: Any, gpus: Sequence[Gpu], owner: Callable[[int], tuple[int | None, str, str]] = proc_owner
) -> list[GpuProcess]:
    """Compute and graphics processes on the given GPUs, with their owners."""
    found = []
    for gpu in gpus:
        h = _handle(nvml, gpu)
        procs = list(nvml.nvmlDeviceGetComputeRunningProcesses(h))
        with contextlib.suppress(Exception):  # not supported on compute-only cards
            procs += list(nvml.nvmlDeviceGetGraphicsRunningProcesses(h))
        for p in procs:
            uid, user, cmd = owner(p.pid)
            mem = getattr(p, "usedGpuMemory", None)
            found.append(GpuProcess(p.pid, gpu.uuid, gpu.index, mem, uid, user, cmd))
    return found


# -- the cell's GPU set -------------------------------------------------------------------


@dataclass(frozen=True)
class GpuSet:
    """The cell's GPUs as resolved once: the request and the devices it names."""

    request: GpuRequest
    gpus: tuple[Gpu, ...]
    driver: bool  # False: no NVIDIA driver on this machine

    @property
    def uuids(self) -> list[str]:
        return [g.uuid for g in self.gpus]

    def sandbox_ids(self) -> list[str]:
        """What the sandbox's CUDA_VISIBLE_DEVICES gets: UUIDs when known, else the raw ids."""
        if self.gpus:
            return self.uuids
        return list(self.request.ids or ())


def resolve_gpu_set(env: Mapping[str, str], explicit: str | None = None, nvml: Any | None = None) -> GpuSet:
    request = requested_gpus(env, explicit)
    if nvml is None:
        nvml = load_nvml()
    if nvml is None:
        return GpuSet(request, (), driver=False)
    devices = list_gpus(nvml)
    if not request.known:
        return GpuSet(request, (), driver=True)
    return GpuSet(request, tuple(resolve_ids(request.ids or (), devices)), driver=True)


# -- leases: one card per job on machines without a scheduler -------------------------------


def _lock_path(lock_dir: Path, gpu_id: str) -> Path:
    return lock_dir / f"gpu-{gpu_id.replace('/', '_')}.lock"


@contextlib.contextmanager
def lease_gpus(
    pool: Sequence[str], count: int, lock_dir: Path, timeout_s: float = 7 * 86400, poll_s: float = 1.0
) -> Iterator[list[str]]:
    """Hold ``count`` ids of ``pool`` exclusively for the with-block.

    An flock per card: released by the kernel when the holder exits however it exits,
    so a killed job never leaves a card leased. All-or-nothing, so two jobs each
    holding half of what they need cannot wait on each other forever.
    """
    if count > len(pool):
        raise HarnessError(f"site.gpu_pool has {len(pool)} GPU(s), the cell needs {count}")
    lock_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(PermissionError):
        lock_dir.chmod(0o1777)  # every user of the machine leases from the same pool
    deadline = time.monotonic() + timeout_s
    while True:
        held: list[tuple[str, int]] = []
        for gpu_id in pool:
            fd = os.open(_lock_path(lock_dir, gpu_id), os.O_RDONLY | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            held.append((gpu_id, fd))
            if len(held) == count:
                break
        if len(held) == count:
            break
        for _, fd in held:
            os.close(fd)
        if time.monotonic() > deadline:
            raise HarnessError(f"no {count} free GPU(s) in site.gpu_pool after {timeout_s:.0f} s")
        time.sleep(poll_s)
    try:
        yield [g for g, _ in held]
    finally:
        for _, fd in held:
            os.close(fd)


@contextlib.contextmanager
def job_gpu_set(num_gpus: int, site: Mapping[str, Any], env: Mapping[str, str], nvml: Any | None) -> Iterator[GpuSet]:
    """The GPU set of a job that needs ``num_gpus`` cards, for the duration of the job.

    With ``site.gpu_pool`` (a machine without a scheduler) the cards are leased from
    the pool; otherwise they are whatever the scheduler (or site.gpu_ids) says.
    """
    if num_gpus == 0:
        yield GpuSet(GpuRequest("cell needs no GPU", ()), (), driver=nvml is not None)
        return
    pool = site.get("gpu_pool")
    if not pool:
        yield resolve_gpu_set(env, site.get("gpu_ids"), nvml)
        return
    lock_dir = Path(site.get("gpu_lock_dir") or Path(tempfile.gettempdir()) / "ptb-gpu-locks")
    with lease_gpus(_split_ids(str(pool)), num_gpus, lock_dir) as ids:
        request = GpuRequest("site.gpu_pool lease", tuple(ids))
        devices = tuple(resolve_ids(ids, list_gpus(nvml))) if nvml is not None else ()
        yield GpuSet(request, devices, driver=nvml is not None)


# -- reaping ------------------------------------------------------------------------------


@dataclass
class ReapReport:
    mode: str
    scope: list[str]
    victims: list[GpuProcess]
    killed: list[int]
    survivors: list[int]
    note: str = ""


def _gone(pid: int) -> bool:
    """No such process, or a zombie: it has exited and holds no GPU memory."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 :].split()[0] == b"Z"


def _ancestors(pid: int) -> set[int]:
    """pid and its ancestors: never candidates, even if they hold a CUDA context."""
    out = {pid}
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            pid = int(stat[stat.rfind(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
        out.add(pid)
    return out


def reap(
    gpu_set: GpuSet,
    mode: ReapMode,
    *,
    scope: Literal["cell", "node"] = "cell",
    dry_run: bool = False,
    nvml: Any | None = None,
    my_uid: int | None = None,
    kill: Callable[[int, int], None] = os.kill,
    owner: Callable[[int], tuple[int | None, str, str]] = proc_owner,
    wait_s: float = 60.0,
    poll_s: float = 0.2,
) -> ReapReport:
    """Kill the processes ``choose_victims`` picks, then wait (bounded) until they are
    gone from the GPUs. Every kill is logged with pid, user, GPU, memory and command."""
    if mode == "none":
        return ReapReport(mode, [], [], [], [], "reap mode none: nothing done")
    if nvml is None:
        nvml = load_nvml() if gpu_set.driver else None
    if nvml is None:
        return ReapReport(mode, [], [], [], [], "no NVIDIA driver: nothing to reap")
    if scope == "node":
        targets = list_gpus(nvml)
    elif gpu_set.request.known:
        targets = list(gpu_set.gpus)
    elif mode == "all":
        raise HarnessError(
            "reap mode all needs the cell's GPU set, but no scheduler or CUDA variable names it"
            " (set site.gpu_scope: node only for whole-node claims)"
        )
    else:
        targets = []
    if not targets:
        return ReapReport(mode, [], [], [], [], "the cell has no GPUs: nothing to reap")
    uid = os.getuid() if my_uid is None else my_uid
    uuids = [g.uuid for g in targets]
    processes = list_processes(nvml, targets, owner)
    victims = choose_victims(processes, uuids, mode, uid, frozenset(_ancestors(os.getpid())))
    report = ReapReport(mode, uuids, victims, [], [])
    for v in victims:
        if dry_run:
            log.info("reap (dry run) would kill %s", v.describe())
            continue
        try:
            kill(v.pid, signal.SIGKILL)
            report.killed.append(v.pid)
            log.warning("reap killed %s", v.describe())
        except ProcessLookupError:
            log.info("reap: pid %d already gone", v.pid)
        except PermissionError:
            log.error("reap: not permitted to kill %s", v.describe())
    if report.killed:
        deadline = time.monotonic() + wait_s
        pending = set(report.killed)
        while pending and time.monotonic() < deadline:
            on_gpu = {p.pid for p in list_processes(nvml, targets, owner)}
            pending = {p for p in pending if p in on_gpu or not _gone(p)}
            if pending:
                time.sleep(poll_s)
        report.survivors = sorted(pending)
        if pending:
            log.error("reap: still on the GPU after %.0f s: %s", wait_s, report.survivors)
    return report


def time_reap_decision(nvml: Any, gpus: Sequence[Gpu], calls: int = 20) -> tuple[float, float]:
    """Median seconds of one reap decision (list the GPUs' processes through NVML, choose
    the victims; nothing is signalled) and of one `nvidia-smi` process query, the way
    shell harnesses decide. For `bench/run_all.py` and the GPU checks."""
    import statistics
    import subprocess

    nv, smi = [], []
    query = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"]
    for _ in range(calls):
        t = time.perf_counter()
        choose_victims(list_processes(nvml, gpus), [g.uuid for g in gpus], "own", os.getuid())
        nv.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run(query, capture_output=True, check=True)
        smi.append(time.perf_counter() - t)
    return statistics.median(nv), statistics.median(smi)
