"""GPU ids from the environment: which cards the scheduler (or the site) gave this job.

One public entry, ``requested_gpus``; it reads variables only and never touches a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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


def split_ids(value: str) -> tuple[str, ...]:
    """A comma- or space-separated id list; the "no GPU" spellings give no ids."""
    if value.strip().lower() in NO_GPU_VALUES:
        return ()
    ids = tuple(p.strip() for p in value.replace(" ", ",").split(",") if p.strip())
    return tuple(i for i in ids if i.lower() not in NO_GPU_VALUES)


def requested_gpus(env: Mapping[str, str], explicit: str | None = None) -> GpuRequest:
    """The job's GPU ids: an explicit setting, then the scheduler's variables, then CUDA's."""
    if explicit is not None:
        return GpuRequest("site.gpu_ids", split_ids(str(explicit)))
    for name in GPU_ENV_SOURCES:
        # `all` (container runtimes) names no particular set: look further
        if name in env and env[name].strip().lower() != "all":
            return GpuRequest(name, split_ids(env[name]))
    return GpuRequest("none set", None)
