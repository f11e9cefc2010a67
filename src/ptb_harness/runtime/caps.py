"""One cell's caps in force: its cgroup (where one can be made) and its rlimits, applied
to every launch of the cell's agent, read back after the solve, and removed.

    with confine_cell(limits, name) as caps:
        launch = caps.wrap(launch)          # every turn, the preflight too
        ...
        caps.record()                       # for solve.json (hits read from the cgroup)
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ptb_harness.core.errors import HarnessError
from ptb_harness.runtime.cgroups import CellCgroup, CgroupError, Placement, this_machine
from ptb_harness.runtime.confine import FAILED, PREFIX, confine_argv
from ptb_harness.runtime.limits import AgentLimits, Rlimit, cap_hit, rlimits

log = logging.getLogger("ptb_harness.runtime.caps")


class _HasArgv(Protocol):
    argv: list[str]


L = TypeVar("L", bound=_HasArgv)


def no_cgroup_reason(placement: Placement) -> str | None:
    """Why the cells' memory or process counts cannot be capped by a cgroup here, or None."""
    if not placement.missing:
        return None
    return "; ".join(f"{c}: {why}" for c, why in placement.missing.items())


def no_cgroup_warning(limits: AgentLimits, placement: Placement | None = None) -> str | None:
    """The one line a run prints when its cells' agents get no cgroup (mode auto)."""
    if limits.cgroup != "auto":
        return None
    why = no_cgroup_reason(placement or this_machine(limits.cgroup_parent))
    if why is None:
        return None
    return (
        f"WARNING: no cgroup can be made for the cells' agents on this host ({why}): their memory and "
        "process counts are not capped, only their rlimits; run as root or under a delegated cgroup "
        "(site.agent_limits.cgroup_parent), or set site.agent_limits.cgroup: none"
    )


def _user_processes() -> int:
    """How many processes this user has now (what RLIMIT_NPROC counts outside a cgroup)."""
    uid, n = os.getuid(), 0
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                with contextlib.suppress(OSError):
                    n += os.stat(f"/proc/{name}").st_uid == uid
    return n


def may_raise_hard_limits() -> bool:
    """Whether this process holds CAP_SYS_RESOURCE (root in a container may not)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/self/status") as f:
            cap_eff = next(line for line in f if line.startswith("CapEff:")).split()[1]
        return bool(int(cap_eff, 16) & (1 << 24))
    return False


def within_hard_limits(wanted: list[Rlimit], may_raise: bool) -> list[Rlimit]:
    """The rlimits the agent really gets: where this process may not raise a hard limit,
    the current one stays and the soft one is kept under it (what the record says)."""
    if may_raise:
        return wanted
    out = []
    for res, soft, hard in wanted:
        _, now = resource.getrlimit(res)
        if now != resource.RLIM_INFINITY and hard > now:
            soft, hard = min(soft, now), now
        out.append((res, soft, hard))
    return out


@dataclass
class CellCaps:
    """The caps of one cell's agent while it runs."""

    limits: AgentLimits
    cgroup: CellCgroup | None
    #: why the cell has no cgroup (None when it has one, or site.agent_limits.cgroup is none)
    no_cgroup: str | None
    rlimits: list[Rlimit]

    def wrap(self, launch: L) -> L:
        """The launch, confined: its first process joins the cgroup and sets the rlimits."""
        procs = self.cgroup.procs_files if self.cgroup else []
        argv = confine_argv(sys.executable, procs, self.rlimits, list(launch.argv))
        return dataclasses.replace(launch, argv=argv)  # type: ignore[type-var]

    def describe(self) -> str:
        """One line for the cell's log: the caps, and where they are held."""
        said = f"memory {self.limits.memory_bytes >> 20} MiB, {self.limits.pids_max} processes"
        if self.cgroup is not None:
            return f"{said} in cgroup {', '.join(str(d) for d in self.cgroup.made)}"
        if self.no_cgroup:
            return f"no cgroup ({self.no_cgroup}): rlimits only"
        return "rlimits only (site.agent_limits.cgroup: none)"

    def hit(self) -> str | None:
        """'the agent hit its memory cap (...)', from the cgroup's event files, or None."""
        return cap_hit(self.cgroup.hits(), self.limits.record()) if self.cgroup else None

    def record(self) -> dict[str, Any]:
        """solve.json's ``limits``: the caps, the cgroup and what it counted, the rlimits."""
        return {
            **self.limits.record(),
            "cgroup": self.cgroup.record() if self.cgroup else None,
            "no_cgroup": self.no_cgroup,
            "rlimits": {_RLIMIT_NAMES.get(r, str(r)): [soft, hard] for r, soft, hard in self.rlimits},
            "hit": self.hit(),
        }


#: the rlimits the agent gets, by name (RLIMIT_OFILE is NOFILE's alias on Linux)
_RLIMIT_NAMES = {
    resource.RLIMIT_NOFILE: "NOFILE",
    resource.RLIMIT_CORE: "CORE",
    resource.RLIMIT_FSIZE: "FSIZE",
    resource.RLIMIT_NPROC: "NPROC",
}


def _probe(cg: CellCgroup) -> None:
    """A process joins the new cgroup as the agent's will (v2 delegation may allow making
    a cgroup but not moving into it); CgroupError when it cannot."""
    argv = confine_argv(sys.executable, cg.procs_files, [], ["true"])
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={"PATH": os.defpath})
    if res.returncode != 0:
        lines = [line for line in res.stderr.splitlines() if line.startswith(PREFIX)]
        why = lines[-1].removeprefix(PREFIX) if lines else f"exit status {res.returncode}"
        raise CgroupError(why if res.returncode == FAILED else f"the probe failed: {why}")


def _make_cgroup(limits: AgentLimits, name: str) -> tuple[CellCgroup | None, str | None]:
    if limits.cgroup == "none":
        return None, None
    placement = this_machine(limits.cgroup_parent)
    why = no_cgroup_reason(placement)
    cg = None
    if placement.parents:
        try:
            cg = CellCgroup.create(placement, name, limits)
            _probe(cg)
        except CgroupError as e:
            if cg is not None:
                cg.remove()
            cg, why = None, str(e)
    if why and limits.cgroup == "required":
        raise HarnessError(f"site.agent_limits.cgroup is required, but no cgroup can be made: {why}")
    return cg, why


@contextlib.contextmanager
def confine_cell(limits: AgentLimits, name: str) -> Iterator[CellCaps]:
    """The cell's caps for as long as it runs: its cgroup ``name`` made (where possible)
    and removed at the end, once nothing of the cell is left in it."""
    cg, why = _make_cgroup(limits, name)
    pids_in_cgroup = cg is not None and "pids" in cg.dirs
    root = os.geteuid() == 0
    users = 0 if root or pids_in_cgroup else _user_processes()
    wanted = rlimits(limits, root=root, pids_in_cgroup=pids_in_cgroup, user_processes=users)
    caps = CellCaps(limits, cg, why, within_hard_limits(wanted, may_raise_hard_limits()))
    try:
        yield caps
    finally:
        left = cg.remove() if cg is not None else None
        if left:
            log.warning("cell cgroup not removed: %s", left)
