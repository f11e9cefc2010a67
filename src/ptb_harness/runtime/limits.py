"""What one cell's agent may use: its caps (typed, built by ptb_harness.campaign.reader),
the rlimits its process gets, and how a cap that was hit is named.

Memory and process count are held by a cgroup per cell where the harness may make one
(``ptb_harness.runtime.cgroups``); rlimits are set in every case, in the child before it
executes the agent (``ptb_harness.runtime.confine``). The decisions here are pure.
"""

from __future__ import annotations

import resource
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

CgroupMode = Literal["auto", "required", "none"]
MiB = 2**20


@dataclass(frozen=True)
class AgentLimits:
    """The site's caps for each cell's agent (site.agent_limits), resolved."""

    #: the cgroup's memory cap (memory.max / memory.limit_in_bytes; no swap beyond it)
    memory_bytes: int
    #: the cgroup's process cap (pids.max; threads count), and RLIMIT_NPROC's where it counts
    pids_max: int
    #: RLIMIT_NOFILE (soft and hard)
    nofile: int
    #: RLIMIT_FSIZE: the largest file the agent may write; None = unlimited
    fsize_bytes: int | None
    #: `auto`: a cgroup where one can be made, one warning per run where not; `required`:
    #: a solve without one is refused; `none`: rlimits only
    cgroup: CgroupMode = "auto"
    #: the cgroup the cells' cgroups are made in; None = found from the harness's own
    cgroup_parent: str | None = None

    def record(self) -> dict[str, int | str | None]:
        return {
            "memory_bytes": self.memory_bytes,
            "pids_max": self.pids_max,
            "nofile": self.nofile,
            "fsize_bytes": self.fsize_bytes,
            "cgroup_mode": self.cgroup,
        }


def default_memory_mb(job_mem_mb: int) -> int:
    """The agent's memory cap when the site names none: the solve job's memory less what
    the harness keeps for itself (1 GiB, a quarter of a job under 4 GiB)."""
    return job_mem_mb - min(1024, job_mem_mb // 4)


#: (resource, soft, hard); RLIM_INFINITY for unlimited
Rlimit = tuple[int, int, int]


def rlimits(limits: AgentLimits, *, root: bool, pids_in_cgroup: bool, user_processes: int) -> list[Rlimit]:
    """The rlimits the agent's process gets before it executes.

    NOFILE and FSIZE as configured, CORE 0 (no core dump of a process that may hold a
    secret). NPROC only where it counts something of the cell's: never for root (the
    kernel exempts uid 0 and any process with CAP_SYS_RESOURCE or CAP_SYS_ADMIN, and a
    user namespace made by root maps its processes to uid 0 outside), and never when a
    pids cgroup holds the cell (it counts exactly the cell's tasks). Otherwise it counts
    every process of the harness's user (in its user namespace), so the cap is raised by
    the ``user_processes`` the user has now: the cell may start about pids_max more.
    """
    out: list[Rlimit] = [
        (resource.RLIMIT_NOFILE, limits.nofile, limits.nofile),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    if limits.fsize_bytes is not None:
        out.append((resource.RLIMIT_FSIZE, limits.fsize_bytes, limits.fsize_bytes))
    if not root and not pids_in_cgroup:
        n = limits.pids_max + user_processes
        out.append((resource.RLIMIT_NPROC, n, n))
    return out


#: The caps a cgroup reports hits of, by the name the evidence gives them.
CapName = Literal["memory", "process"]


def cap_hit(hits: Mapping[str, int], limits: Mapping[str, int | None]) -> str | None:
    """'the agent hit its memory cap (4096 MiB)' (and/or its process cap) from the counts
    the cgroup's event files gave (``hits``: memory = OOM kills, process = refused forks),
    None when no cap was hit. ``limits`` are the caps as recorded."""
    said = []
    if hits.get("memory"):
        mib = (limits.get("memory_bytes") or 0) // MiB
        n = hits["memory"]
        said.append(f"its memory cap ({mib} MiB; {n} process{'es' if n != 1 else ''} killed)")
    if hits.get("process"):
        n = hits["process"]
        said.append(f"its process cap ({limits.get('pids_max')}; {n} fork{'s' if n != 1 else ''} refused)")
    return f"the agent hit {' and '.join(said)}" if said else None
