"""A cgroup per cell: the agent's memory and process caps, on cgroup v1 or v2.

Where each controller lives is read from /proc/self/mountinfo (v1: a hierarchy per
controller; v2: the unified one, whose cgroup.controllers lists it), and where the
harness itself is from /proc/self/cgroup. A cell's cgroup is made:

- v1: below the harness's own cgroup in each of the memory and pids hierarchies (as
  root; Slurm's v1 job cgroups are root's);
- v2: below the harness's own cgroup when that one hands memory and pids to its children
  (cgroup.subtree_control), else below its parent when the parent does and may be
  written (Slurm's step ``user`` dir, a systemd unit with Delegate=): a v2 cgroup that
  holds processes cannot hand controllers down, so the cell's cgroup is then a sibling;
- or below ``site.agent_limits.cgroup_parent`` (a path as /proc/self/cgroup names them).

It is named after the cell and attempt (and the harness's pid), and removed after the
solve. Only cgroups made here are ever written or removed; the parent's files are only
read. No process is moved by the harness: the agent's first process joins the cgroup
itself (``ptb_harness.runtime.confine``) before it executes anything of the agent, so the
harness's own processes are never in it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ptb_harness.runtime.limits import AgentLimits
from ptb_harness.runtime.procs import read_proc_stat

CONTROLLERS = ("memory", "pids")


class CgroupError(Exception):
    """A cell's cgroup cannot be made or configured (the message says why, in one line)."""


@dataclass(frozen=True)
class Hierarchy:
    """A mounted cgroup hierarchy (a line of /proc/self/mountinfo)."""

    version: int
    mount: Path
    #: the mount's root within the hierarchy (not / in some containers)
    root: str
    #: v1: the controllers bound to it; v2: those its root offers (cgroup.controllers)
    controllers: frozenset[str]


def parse_mountinfo(text: str, read_controllers=lambda mount: "") -> list[Hierarchy]:
    """The cgroup hierarchies of a /proc/self/mountinfo text. ``read_controllers(mount)``
    gives a v2 mount's cgroup.controllers."""
    found = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        fstype, root, mount = tail[0], fields[3], Path(fields[4].replace("\\040", " "))
        if fstype == "cgroup":
            names = frozenset(o for o in tail[2].split(",") if o in CONTROLLERS)
            if names:
                found.append(Hierarchy(1, mount, root, names))
        elif fstype == "cgroup2":
            found.append(Hierarchy(2, mount, root, frozenset(read_controllers(mount).split()) & set(CONTROLLERS)))
    return found


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """Controller -> the process's cgroup path, from a /proc/PID/cgroup text ('' for v2)."""
    own: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for name in parts[1].split(",") if parts[1] else [""]:
                own[name] = parts[2]
    return own


def _within(hierarchy: Hierarchy, path: str) -> Path:
    """The directory of a cgroup path (as /proc/self/cgroup names it) in the mount."""
    root = hierarchy.root.rstrip("/")
    rel = path[len(root) :] if root and (path == root or path.startswith(root + "/")) else path
    return hierarchy.mount / rel.lstrip("/")


def _delegates(directory: Path, controller: str) -> bool:
    try:
        return controller in (directory / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False


@dataclass(frozen=True)
class Placement:
    """Where each controller's cell cgroups are made: controller -> (version, parent dir);
    ``missing`` says why a controller has none."""

    parents: Mapping[str, tuple[int, Path]]
    missing: Mapping[str, str] = field(default_factory=dict)


def _parent_for(controller: str, h: Hierarchy, own: Mapping[str, str], override: str | None) -> Path | str:
    """The directory a cell's cgroup for ``controller`` is made in, or why there is none."""
    if override is not None:
        parent = _within(h, override)
        if not parent.is_dir():
            return f"site.agent_limits.cgroup_parent {override} is not a cgroup ({parent} is missing)"
        if h.version == 2 and not _delegates(parent, controller):
            return f"{parent} does not hand {controller} to its children (its cgroup.subtree_control)"
        return parent
    path = own.get(controller if h.version == 1 else "")
    if path is None:
        return f"this process has no {controller} cgroup in /proc/self/cgroup"
    here = _within(h, path)
    if h.version == 1 or _delegates(here, controller):
        return here
    if here != h.mount and _delegates(here.parent, controller):
        return here.parent
    return (
        f"{controller} is not delegated below the harness's cgroup {path} (cgroup.subtree_control "
        "of it and of its parent)"
    )


def place(hierarchies: Sequence[Hierarchy], own: Mapping[str, str], override: str | None = None) -> Placement:
    """Where the cells' cgroups go on this machine (v1 wins for a controller bound there)."""
    parents: dict[str, tuple[int, Path]] = {}
    missing: dict[str, str] = {}
    for controller in CONTROLLERS:
        hs = sorted((h for h in hierarchies if controller in h.controllers), key=lambda h: h.version)
        if not hs:
            missing[controller] = f"no cgroup hierarchy offers the {controller} controller"
            continue
        parent = _parent_for(controller, hs[0], own, override)
        if isinstance(parent, str):
            missing[controller] = parent
        elif not os.access(parent, os.W_OK | os.X_OK):
            missing[controller] = f"{parent} is not writable (not root, and not delegated to this user)"
        else:
            parents[controller] = (hs[0].version, parent)
    return Placement(parents, missing)


def this_machine(override: str | None = None) -> Placement:
    """The placement for the running process, from its /proc files."""

    def controllers(mount: Path) -> str:
        with contextlib.suppress(OSError):
            return (mount / "cgroup.controllers").read_text()
        return ""

    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        own = Path("/proc/self/cgroup").read_text()
    except OSError as e:
        return Placement({}, {c: f"cannot read /proc ({e.strerror})" for c in CONTROLLERS})
    return place(parse_mountinfo(mountinfo, controllers), parse_proc_cgroup(own), override)


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as e:
        raise CgroupError(f"cannot write {value.strip()} to {path} ({e.strerror})") from None


def _read_keyed(path: Path) -> dict[str, int]:
    """A flat-keyed cgroup file ('oom_kill 3' lines) as a dict; {} when unreadable."""
    out = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            with contextlib.suppress(ValueError):
                out[key] = int(value)
    return out


def _read_int(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().split()[0])
    return None


#: Per version and controller: the files that set the cap, the file and key a hit is
#: counted by, and the file of the peak.
CAP_FILES = {
    (1, "memory"): ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"),
    (2, "memory"): ("memory.max", "memory.swap.max"),
    (1, "pids"): ("pids.max",),
    (2, "pids"): ("pids.max",),
}
HIT_FILES = {
    (1, "memory"): ("memory.oom_control", "oom_kill"),
    (2, "memory"): ("memory.events", "oom_kill"),
    (1, "pids"): ("pids.events", "max"),
    (2, "pids"): ("pids.events", "max"),
}
PEAK_FILES = {(1, "memory"): "memory.max_usage_in_bytes", (2, "memory"): "memory.peak"}
#: what the evidence calls each controller's cap
CAP_NAMES = {"memory": "memory", "pids": "process"}


@dataclass
class CellCgroup:
    """The cgroup(s) of one cell: one directory per controller on v1, one on v2."""

    dirs: dict[str, tuple[int, Path]]
    limits: AgentLimits
    #: what was written to cap swap (or why swap is not capped)
    swap: str = ""
    made: list[Path] = field(default_factory=list)

    @classmethod
    def create(cls, placement: Placement, name: str, limits: AgentLimits) -> CellCgroup:
        """Make and configure the cell's cgroup under each controller's parent; on any
        failure, remove what was made and raise CgroupError."""
        cg = cls({}, limits)
        try:
            for controller, (version, parent) in placement.parents.items():
                here = parent / name
                if here not in cg.made:
                    try:
                        here.mkdir()
                    except OSError as e:
                        raise CgroupError(f"cannot make the cell's cgroup {here} ({e.strerror})") from None
                    cg.made.append(here)
                cg.dirs[controller] = (version, here)
                cg._configure(controller, version, here)
        except CgroupError:
            cg.remove()
            raise
        return cg

    def _configure(self, controller: str, version: int, here: Path) -> None:
        files = CAP_FILES[(version, controller)]
        if controller == "pids":
            _write(here / files[0], str(self.limits.pids_max))
            return
        # memory first: v1 refuses a memory+swap limit below the memory limit
        _write(here / files[0], str(self.limits.memory_bytes))
        swap = here / files[1]
        if swap.exists():
            _write(swap, str(self.limits.memory_bytes if version == 1 else 0))
            self.swap = f"{files[1]} set: no swap beyond the cap"
        else:
            self.swap = f"{files[1]} absent (swap accounting off): swap is not capped"

    @property
    def procs_files(self) -> list[str]:
        """The cgroup.procs files the agent's first process writes its pid to."""
        return [str(d / "cgroup.procs") for d in dict.fromkeys(d for _, d in self.dirs.values())]

    def hits(self) -> dict[str, int]:
        """Cap name -> how often it was hit: OOM kills (memory), refused forks (process);
        read from the cgroup's event files, never guessed from an exit status."""
        out = {}
        for controller, (version, here) in self.dirs.items():
            file, key = HIT_FILES[(version, controller)]
            out[CAP_NAMES[controller]] = _read_keyed(here / file).get(key, 0)
        return out

    def peaks(self) -> dict[str, int | None]:
        out: dict[str, int | None] = {}
        for controller, (version, here) in self.dirs.items():
            if controller == "memory":
                out["memory_peak_bytes"] = _read_int(here / PEAK_FILES[(version, controller)])
            else:
                out["pids_peak"] = _read_int(here / "pids.peak")
        return out

    def record(self) -> dict:
        """What solve.json says of the cell's cgroup."""
        return {
            "dirs": {c: str(d) for c, (_, d) in self.dirs.items()},
            "version": {c: v for c, (v, _) in self.dirs.items()},
            "swap": self.swap,
            "hits": self.hits(),
            **self.peaks(),
        }

    def remove(self, wait_s: float = 10.0) -> str | None:
        """Stop what is left in the cell's cgroup (only the harness's own descendants: a
        pid written into it by anyone else is left alone) and remove the directories
        made here. Returns what could not be removed, or None."""
        deadline = time.monotonic() + wait_s
        killed: set[int] = set()
        left: list[str] = []
        for here in reversed(self.made):
            # until it is empty: descendants killed, the rest (a sandbox's init that dies
            # with its parent) given until the deadline to go
            while _procs(here) and time.monotonic() < deadline:
                pids = _descendants_in(here)
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                killed.update(pids)
                time.sleep(0.02)
            try:
                here.rmdir()
            except FileNotFoundError:
                pass
            except OSError as e:
                left.append(f"{here} ({e.strerror})")
        _reap(killed, deadline)
        self.made = []
        return "; ".join(left) or None


def _procs(here: Path) -> list[int]:
    try:
        return [int(p) for p in (here / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _descendant(pid: int, me: int) -> bool:
    """Whether pid descends from this process (its ppid chain reaches us)."""
    for _ in range(4096):
        stat = read_proc_stat(pid)
        if stat is None or stat.ppid <= 1:
            return False
        if stat.ppid == me:
            return True
        pid = stat.ppid
    return False


def _descendants_in(here: Path) -> list[int]:
    me = os.getpid()
    return [p for p in _procs(here) if p != me and _descendant(p, me)]


def _reap(pids: set[int], deadline: float) -> None:
    """Reap those of pids that are our children (orphans re-parented to us, the subreaper),
    so that none is left a zombie."""
    me = os.getpid()
    mine = {p for p in pids if (stat := read_proc_stat(p)) is not None and stat.ppid == me}
    while mine and time.monotonic() < deadline:
        for pid in list(mine):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                mine.discard(pid)
        if mine:
            time.sleep(0.01)


def cgroup_name(slug: str, attempt: int) -> str:
    """The cell's cgroup: after the cell and attempt, with the harness's pid (two harnesses
    of different campaigns may solve cells of the same name on one host)."""
    return f"ptb-{slug[:180]}-attempt{attempt}-{os.getpid()}"
