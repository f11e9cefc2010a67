"""NVML access: the node's GPUs and the processes on them, with their owners.

NVML is reached through an injectable module (``pynvml`` by default, see ``load_nvml``)
so the logic above it is tested against a stand-in; on a machine without NVIDIA drivers
``load_nvml`` gives None and every caller degrades to "no GPUs". Entries: ``load_nvml``,
then ``list_gpus`` and ``list_processes`` on what it returned.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: (uid, user name, command line) of a PID; uid None where /proc does not show it.
Owner = tuple[int | None, str, str]


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


def _mig_instances(nvml: Any, parent: Any, index: int) -> list[Gpu]:
    """The MIG instances of one card: addressable by their own UUIDs."""
    try:
        count = nvml.nvmlDeviceGetMaxMigDeviceCount(parent)
    except Exception:  # not MIG-capable, or not supported by the driver
        return []
    found = []
    for m in range(count):
        try:
            handle = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, m)
        except Exception:  # slot not populated
            continue
        found.append(Gpu(index, _text(nvml.nvmlDeviceGetUUID(handle)), "MIG instance", mig=True))
    return found


def list_gpus(nvml: Any) -> list[Gpu]:
    """Every card of the node, each followed by its MIG instances."""
    gpus = []
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        gpus.append(Gpu(i, _text(nvml.nvmlDeviceGetUUID(h)), _text(nvml.nvmlDeviceGetName(h))))
        gpus += _mig_instances(nvml, h, i)
    return gpus


def device_handle(nvml: Any, gpu: Gpu) -> Any:
    """NVML's handle of a card or MIG instance, by its UUID."""
    return nvml.nvmlDeviceGetHandleByUUID(gpu.uuid.encode() if isinstance(gpu.uuid, str) else gpu.uuid)


def proc_owner(pid: int) -> Owner:
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


def list_processes(nvml: Any, gpus: Sequence[Gpu], owner: Callable[[int], Owner] = proc_owner) -> list[GpuProcess]:
    """Compute and graphics processes on the given GPUs, with their owners."""
    found = []
    for gpu in gpus:
        h = device_handle(nvml, gpu)
        procs = list(nvml.nvmlDeviceGetComputeRunningProcesses(h))
        with contextlib.suppress(Exception):  # not supported on compute-only cards
            procs += list(nvml.nvmlDeviceGetGraphicsRunningProcesses(h))
        for p in procs:
            uid, user, cmd = owner(p.pid)
            mem = getattr(p, "usedGpuMemory", None)
            found.append(GpuProcess(p.pid, gpu.uuid, gpu.index, mem, uid, user, cmd))
    return found
