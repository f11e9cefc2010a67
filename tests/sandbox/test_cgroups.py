"""A cgroup per cell: where it goes (v1 and v2), what is written, what a hit reads as, and
that it is removed. The v2 cases run on a stand-in: a temp dir of fake control files
(this machine mounts memory and pids on v1, so no real v2 hierarchy can hold them here).
The v1 cases at the end are real: root on a machine with the memory and pids hierarchies
(CI's, this one's)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptb_harness.core.errors import HarnessError
from ptb_harness.runtime.caps import confine_cell, no_cgroup_warning
from ptb_harness.runtime.cgroups import (
    CellCgroup,
    Hierarchy,
    Placement,
    parse_mountinfo,
    parse_proc_cgroup,
    place,
    this_machine,
)
from ptb_harness.runtime.limits import AgentLimits
from ptb_harness.runtime.procs import become_subreaper

LIMITS = AgentLimits(memory_bytes=64 * 2**20, pids_max=40, nofile=512, fsize_bytes=10**6)

#: this machine's (a hybrid: memory and pids on v1, an empty v2 beside them)
MOUNTINFO_V1 = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
PROC_CGROUP_V1 = """\
9:name=systemd:/
8:pids:/
4:memory:/process_api/03a3
1:cpu,cpuacct:/
0::/
"""


def test_mountinfo_and_proc_cgroup_are_read_per_controller():
    hs = parse_mountinfo(MOUNTINFO_V1, lambda mount: "hugetlb")
    assert hs == [
        Hierarchy(1, Path("/sys/fs/cgroup/memory"), "/", frozenset({"memory"})),
        Hierarchy(1, Path("/sys/fs/cgroup/pids"), "/", frozenset({"pids"})),
        Hierarchy(2, Path("/sys/fs/cgroup/unified"), "/", frozenset()),
    ]
    own = parse_proc_cgroup(PROC_CGROUP_V1)
    assert own["memory"] == "/process_api/03a3" and own["pids"] == "/" and own[""] == "/"
    assert own["cpu"] == own["cpuacct"] == "/"
    # a pure v2 host: one hierarchy offering what its root's cgroup.controllers lists
    v2 = parse_mountinfo(
        "30 23 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n", lambda m: "cpu memory pids"
    )
    assert v2 == [Hierarchy(2, Path("/sys/fs/cgroup"), "/", frozenset({"memory", "pids"}))]


def fake_v2(root: Path, tree: dict[str, str]) -> Hierarchy:
    """A stand-in v2 hierarchy: directories with the cgroup.subtree_control given."""
    for rel, subtree in tree.items():
        d = root / rel
        d.mkdir(parents=True, exist_ok=True)
        (d / "cgroup.subtree_control").write_text(subtree + "\n")
        (d / "cgroup.procs").write_text("")
    return Hierarchy(2, root, "/", frozenset({"memory", "pids"}))


def test_v2_cells_go_below_the_harness_when_it_delegates(tmp_path):
    h = fake_v2(tmp_path, {"": "memory pids", "job": "memory pids", "job/harness": "memory pids"})
    got = place([h], {"": "/job/harness"})
    assert got == Placement({"memory": (2, tmp_path / "job/harness"), "pids": (2, tmp_path / "job/harness")}, {})


def test_v2_cells_are_siblings_where_only_the_parent_delegates(tmp_path):
    """Slurm's step `user` dir: the job's processes sit in task_0, a leaf (a v2 cgroup
    with processes cannot hand controllers down), and `user` delegates to its children."""
    h = fake_v2(tmp_path, {"": "memory pids", "job_7/step_0/user": "memory pids", "job_7/step_0/user/task_0": ""})
    got = place([h], {"": "/job_7/step_0/user/task_0"})
    assert got.parents["memory"] == got.parents["pids"] == (2, tmp_path / "job_7/step_0/user")


def test_v2_without_delegation_says_which_controller_and_where(tmp_path):
    h = fake_v2(tmp_path, {"": "memory", "session.scope": ""})
    got = place([h], {"": "/session.scope"})
    assert got.parents == {"memory": (2, tmp_path)}  # the root hands memory down, not pids
    assert "pids is not delegated below the harness's cgroup /session.scope" in got.missing["pids"]
    warning = no_cgroup_warning(LIMITS, got)
    assert warning.startswith("WARNING: no cgroup can be made for the cells' agents on this host (pids: ")
    assert no_cgroup_warning(dataclasses.replace(LIMITS, cgroup="none"), got) is None


def test_an_explicit_parent_is_used_as_a_cgroup_path(tmp_path):
    h = fake_v2(tmp_path, {"": "memory pids", "ptb.slice": "memory pids", "other": ""})
    assert place([h], {"": "/other"}, "/ptb.slice").parents["pids"] == (2, tmp_path / "ptb.slice")
    missing = place([h], {"": "/other"}, "/nope").missing
    assert missing["memory"].startswith("site.agent_limits.cgroup_parent /nope is not a cgroup")
    assert "does not hand memory to its children" in place([h], {"": "/"}, "/other").missing["memory"]


def test_a_container_mount_root_is_taken_off_the_path(tmp_path):
    """In a container the v1 mount's root is the container's cgroup, and /proc/self/cgroup
    names paths from the host's root."""
    (tmp_path / "mem" / "task").mkdir(parents=True)
    h = Hierarchy(1, tmp_path / "mem", "/docker/abc", frozenset({"memory"}))
    got = place([h], {"memory": "/docker/abc/task"})
    assert got.parents["memory"] == (1, tmp_path / "mem" / "task")
    assert "no cgroup hierarchy offers the pids controller" in got.missing["pids"]


def test_v2_stand_in_writes_the_caps_and_reads_hits_from_the_event_files(tmp_path):
    h = fake_v2(tmp_path, {"": "memory pids"})
    cg = CellCgroup.create(place([h], {"": "/"}), "ptb-cell-attempt1-1", LIMITS)
    here = tmp_path / "ptb-cell-attempt1-1"
    assert cg.procs_files == [str(here / "cgroup.procs")]  # one directory holds both on v2
    assert (here / "memory.max").read_text() == str(64 * 2**20)
    assert (here / "pids.max").read_text() == "40"
    assert "memory.swap.max absent" in cg.swap  # the stand-in has no swap file
    assert cg.hits() == {"memory": 0, "process": 0}
    (here / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n")
    (here / "pids.events").write_text("max 7\n")
    assert cg.hits() == {"memory": 2, "process": 7}
    (here / "memory.peak").write_text(f"{64 * 2**20}\n")
    assert cg.record()["memory_peak_bytes"] == 64 * 2**20
    for f in here.iterdir():  # a real cgroupfs dir goes with its files; the stand-in's do not
        f.unlink()
    assert cg.remove() is None and not here.exists() and tmp_path.is_dir()


def test_a_failed_creation_leaves_nothing(tmp_path):
    h = fake_v2(tmp_path, {"": "memory pids"})
    (tmp_path / "taken").mkdir()
    with pytest.raises(Exception, match="cannot make the cell's cgroup"):
        CellCgroup.create(place([h], {"": "/"}), "taken", LIMITS)
    assert (tmp_path / "taken").is_dir()  # not ours: left as it was


# -- real cgroups (v1 here and in CI: root, memory and pids hierarchies) -------------------

REAL = this_machine()
needs_real = pytest.mark.skipif(
    os.geteuid() != 0 or bool(REAL.missing),
    reason=f"needs root and the memory and pids controllers: {REAL.missing}",
)


@dataclasses.dataclass(frozen=True)
class FakeLaunch:
    argv: list[str]


def run_confined(caps, script: str) -> subprocess.CompletedProcess:
    launch = caps.wrap(FakeLaunch(["bash", "-c", script]))
    return subprocess.run(launch.argv, capture_output=True, text=True, timeout=120)


@needs_real
def test_real_cgroup_holds_memory_and_processes_and_names_the_hits():
    name = f"ptb-test-{os.getpid()}"
    with confine_cell(LIMITS, name) as caps:
        dirs = [Path(p).parent for p in caps.cgroup.procs_files]
        res = run_confined(
            caps,
            "grep -E ':(memory|pids):' /proc/self/cgroup; ulimit -n; ulimit -f; ulimit -c; "
            "python3 -c 'x = bytearray(200 * 2**20)'; echo oom=$?; "
            "for i in $(seq 60); do sleep 1 & done 2>/dev/null; wait; echo done",
        )
        record = caps.record()
    assert res.returncode == 0, res.stderr
    assert f"/{name}" in res.stdout and "oom=137" in res.stdout and "done" in res.stdout
    assert res.stdout.split("\n")[2:5] == ["512", "976", "0"]  # bash counts -f in 1024-byte blocks
    cg = record["cgroup"]
    assert cg["hits"]["memory"] >= 1 and cg["hits"]["process"] >= 1, cg
    memory_parent = dirs[0].parent if cg["version"]["memory"] == 1 else None
    if memory_parent is not None and (memory_parent / "memory.memsw.limit_in_bytes").exists():
        assert cg["swap"] == "memory.memsw.limit_in_bytes set: no swap beyond the cap"
    assert cg["memory_peak_bytes"] <= 64 * 2**20 and cg["pids_peak"] <= 40
    assert record["hit"].startswith("the agent hit its memory cap (64 MiB; ")
    assert "its process cap (40; " in record["hit"]
    assert not any(d.exists() for d in dirs), "removed after the solve"
    # the harness itself was never in it
    assert f"/{name}" not in Path("/proc/self/cgroup").read_text()


@needs_real
def test_real_cgroup_stops_what_the_cell_left_before_it_goes():
    """A daemon that left the agent's session (setsid) and its parent: re-parented to the
    harness (a subreaper, as run_budgeted makes it), it is the cell's and is stopped."""
    become_subreaper()
    pid = None
    try:
        with confine_cell(LIMITS, f"ptb-test-left-{os.getpid()}") as caps:
            dirs = [Path(p).parent for p in caps.cgroup.procs_files]
            res = run_confined(caps, "setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo $!")
            pid = int(res.stdout.split()[-1])
            assert Path(f"/proc/{pid}").exists()
        assert not Path(f"/proc/{pid}").exists()
        assert not any(d.exists() for d in dirs)
    finally:
        if pid is not None and Path(f"/proc/{pid}").exists():  # the sleep this test started
            os.kill(pid, 9)


@needs_real
def test_required_cgroup_refuses_where_none_can_be_made():
    required = dataclasses.replace(LIMITS, cgroup="required", cgroup_parent="/no-such-parent-here")
    refused = "site.agent_limits.cgroup is required, but no cgroup can be made"
    with pytest.raises(HarnessError, match=refused), confine_cell(required, "never"):
        pass
    auto = dataclasses.replace(required, cgroup="auto")
    with confine_cell(auto, "never") as caps:
        assert caps.cgroup is None and "is not a cgroup" in caps.no_cgroup
        assert caps.record()["hit"] is None


def test_rlimits_hold_without_a_cgroup():
    off = dataclasses.replace(LIMITS, cgroup="none")
    with confine_cell(off, "unused") as caps:
        assert caps.cgroup is None and caps.no_cgroup is None
        res = run_confined(caps, "ulimit -n; ulimit -c; ulimit -f; head -c 2000000 /dev/zero > /dev/null; echo ok")
    assert res.stdout.split()[:3] == ["512", "0", "976"] and "ok" in res.stdout


def test_confine_refuses_in_one_line_when_it_cannot_join(tmp_path):
    from ptb_harness.runtime.confine import confine_argv

    argv = confine_argv(sys.executable, [str(tmp_path / "no" / "cgroup.procs")], [], ["true"])
    res = subprocess.run(argv, capture_output=True, text=True)
    assert res.returncode == 126
    assert res.stderr.startswith("ptb-harness: confine: cannot join the cell's cgroup (")


def test_confine_reads_back_the_arguments_it_is_given_and_refuses_others():
    from ptb_harness.runtime.confine import FAILED, confine_argv, main, parse

    procs, command = ["/cg/memory/x/cgroup.procs", "/cg/pids/x/cgroup.procs"], ["a", "--", "b"]
    argv = confine_argv("py", procs, [(7, 512, 1024)], command)
    assert argv[:3] == ["py", "-I", "-S"] and parse(argv[4:]) == (procs, [(7, 512, 1024)], command)
    assert parse(["--", "true"]) == ([], [], ["true"])
    for bad in ([], ["--"], ["--join"], ["--join", "p"], ["--rlimit", "7:1", "--", "x"], ["--env", "A", "--", "x"]):
        with pytest.raises(ValueError):
            parse(bad)
        assert main(bad) == FAILED
