"""The cell's GPU set: the ids a job was given (or leased), resolved once to devices.

Entries: ``job_gpu_set`` (a stage's GPUs for the duration of the stage, as the site's
``GpuAssignment`` says) and ``resolve_gpu_set`` (the same without a lease, for
``ptb-harness reap``).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptb_harness.core.errors import HarnessError
from ptb_harness.gpu.ids import GpuRequest, requested_gpus, split_ids
from ptb_harness.gpu.lease import lease_gpus
from ptb_harness.gpu.nvml import Gpu, list_gpus, load_nvml


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


def _index_of(key: str) -> int | None:
    """The index an id names (`3`, `CUDA3`), None for a UUID."""
    if key.isdigit():
        return int(key)
    if key.upper().startswith("CUDA") and key[4:].isdigit():
        return int(key[4:])
    return None


def _by_uuid(raw: str, gpus: Sequence[Gpu]) -> Gpu:
    key = raw.strip().lower()
    exact = [g for g in gpus if g.uuid.lower() == key]
    matches = exact or [g for g in gpus if g.uuid.lower().startswith(key)]
    if not matches:
        raise HarnessError(f"GPU id {raw!r}: no GPU has this UUID")
    if len(matches) > 1:
        raise HarnessError(f"GPU id {raw!r}: ambiguous, matches {', '.join(g.uuid for g in matches)}")
    return matches[0]


def resolve_ids(ids: Sequence[str], gpus: Sequence[Gpu]) -> list[Gpu]:
    """Map job GPU ids to devices: an index, `CUDA<n>`, a full `GPU-`/`MIG-` UUID or a
    unique UUID prefix (HTCondor's short ids). Unknown or ambiguous ids are an error."""
    by_index = {g.index: g for g in gpus if not g.mig}
    chosen: list[Gpu] = []
    for raw in ids:
        index = _index_of(raw.strip())
        if index is None:
            gpu = _by_uuid(raw, gpus)
        elif index in by_index:
            gpu = by_index[index]
        else:
            raise HarnessError(f"GPU id {raw!r}: no GPU with index {index} (have {sorted(by_index)})")
        if gpu not in chosen:
            chosen.append(gpu)
    return chosen


def resolve_gpu_set(env: Mapping[str, str], explicit: str | None = None, nvml: Any | None = None) -> GpuSet:
    """The GPUs the environment (or ``explicit``, site.gpu_ids) names, as devices."""
    request = requested_gpus(env, explicit)
    if nvml is None:
        nvml = load_nvml()
    if nvml is None:
        return GpuSet(request, (), driver=False)
    devices = list_gpus(nvml)
    if not request.known:
        return GpuSet(request, (), driver=True)
    return GpuSet(request, tuple(resolve_ids(request.ids or (), devices)), driver=True)


@dataclass(frozen=True)
class GpuAssignment:
    """How a site gives jobs their GPUs (site.gpu_ids, site.gpu_pool, site.gpu_lock_dir):
    by default the scheduler's variables; ``gpu_ids`` overrides them; with a ``pool`` (a
    machine without a scheduler) each job leases its cards, the locks in ``lock_dir``."""

    gpu_ids: str | None = None
    pool: str | None = None
    lock_dir: Path | None = None

    def locks(self) -> Path:
        return Path(self.lock_dir or Path(tempfile.gettempdir()) / "ptb-gpu-locks")


@contextlib.contextmanager
def job_gpu_set(num_gpus: int, assignment: GpuAssignment, env: Mapping[str, str], nvml: Any | None) -> Iterator[GpuSet]:
    """The GPU set of a job that needs ``num_gpus`` cards, for the duration of the job:
    leased from the site's pool, or whatever the scheduler (or site.gpu_ids) says."""
    if num_gpus == 0:
        yield GpuSet(GpuRequest("cell needs no GPU", ()), (), driver=nvml is not None)
        return
    if not assignment.pool:
        yield resolve_gpu_set(env, assignment.gpu_ids, nvml)
        return
    with lease_gpus(split_ids(str(assignment.pool)), num_gpus, assignment.locks()) as ids:
        request = GpuRequest("site.gpu_pool lease", tuple(ids))
        devices = tuple(resolve_ids(ids, list_gpus(nvml))) if nvml is not None else ()
        yield GpuSet(request, devices, driver=nvml is not None)
