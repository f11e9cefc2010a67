"""The GPU layer against an NVML stand-in (this machine has no NVIDIA driver; the real
NVML runs in tests/gpu/ on the device machine)."""

from __future__ import annotations

import csv
import logging
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptb_harness.core.errors import HarnessError
from ptb_harness.gpu.cellset import GpuSet, resolve_gpu_set, resolve_ids
from ptb_harness.gpu.ids import GpuRequest, requested_gpus
from ptb_harness.gpu.lease import lease_gpus
from ptb_harness.gpu.monitor import GpuMonitor
from ptb_harness.gpu.nvml import GpuProcess, list_gpus
from ptb_harness.gpu.reap import ReapHost, ReapPolicy, choose_victims, reap
from ptb_harness.stages.preflight import verdict


@dataclass
class StandInDevice:
    uuid: str
    name: str = "NVIDIA H200"
    processes: dict[int, int] = field(default_factory=dict)  # pid -> used bytes
    mig: list[str] = field(default_factory=list)


class NvmlStandIn:
    """A stand-in for pynvml (the subset the harness calls), named as such: the real
    NVML cannot run on this machine. Devices and their processes are plain data."""

    class NVMLError(Exception):
        pass

    def __init__(self, devices: list[StandInDevice]):
        self.devices = devices

    def _dev(self, handle):
        return self.devices[handle[1]] if handle[0] == "dev" else None

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("dev", i)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        for i, d in enumerate(self.devices):
            if d.uuid == uuid:
                return ("dev", i)
            if uuid in d.mig:
                return ("mig", i, d.mig.index(uuid))
        raise self.NVMLError("not found")

    def nvmlDeviceGetUUID(self, h):
        return self.devices[h[1]].uuid if h[0] == "dev" else self.devices[h[1]].mig[h[2]]

    def nvmlDeviceGetName(self, h):
        return self.devices[h[1]].name

    def nvmlDeviceGetMaxMigDeviceCount(self, h):
        return len(self.devices[h[1]].mig)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, m):
        return ("mig", h[1], m)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        d = self.devices[h[1]]
        if h[0] == "mig":
            return []
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in d.processes.items()]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return []

    def nvmlDeviceGetMemoryInfo(self, h):
        used = sum(self.devices[h[1]].processes.values())
        return SimpleNamespace(used=used, total=141 * 2**30)

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=50 if self.devices[h[1]].processes else 0)

    def nvmlDeviceGetPowerUsage(self, h):
        return 123_400

    def kill(self, pid, sig):
        """Plays the kernel: the process leaves every GPU."""
        for d in self.devices:
            d.processes.pop(pid, None)


U0, U1, U2 = "GPU-b156e653-1111-2222-3333-444455556666", "GPU-3a4c0000-aaaa-bbbb-cccc-ddddeeeeffff", "GPU-3a4d0000-0"


def nvml3():
    return NvmlStandIn([StandInDevice(U0), StandInDevice(U1, mig=["MIG-5f1e2d3c-0000"]), StandInDevice(U2)])


# -- the GPU set -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "explicit", "expected"),
    [
        (
            {"SLURM_STEP_GPUS": "1", "SLURM_JOB_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "0"},
            None,
            ("SLURM_STEP_GPUS", ("1",)),
        ),
        ({"SLURM_JOB_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"}, None, ("SLURM_JOB_GPUS", ("2", "3"))),
        (
            {"_CONDOR_AssignedGPUs": "GPU-b156e653,GPU-3a4c"},
            None,
            ("_CONDOR_AssignedGPUs", ("GPU-b156e653", "GPU-3a4c")),
        ),
        ({"_CONDOR_AssignedGPUs": "CUDA0, CUDA2"}, None, ("_CONDOR_AssignedGPUs", ("CUDA0", "CUDA2"))),
        ({"_CONDOR_AssignedGPUs": "10000"}, None, ("_CONDOR_AssignedGPUs", ())),
        ({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, None, ("CUDA_VISIBLE_DEVICES", ())),
        ({"CUDA_VISIBLE_DEVICES": ""}, None, ("CUDA_VISIBLE_DEVICES", ())),
        ({"NVIDIA_VISIBLE_DEVICES": "none"}, None, ("NVIDIA_VISIBLE_DEVICES", ())),
        ({"NVIDIA_VISIBLE_DEVICES": "MIG-5f1e2d3c"}, None, ("NVIDIA_VISIBLE_DEVICES", ("MIG-5f1e2d3c",))),
        ({"CUDA_VISIBLE_DEVICES": "0"}, "2", ("site.gpu_ids", ("2",))),
        ({}, None, ("none set", None)),
        ({"NVIDIA_VISIBLE_DEVICES": "all"}, None, ("none set", None)),
        ({"NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VISIBLE_DEVICES": "1"}, None, ("CUDA_VISIBLE_DEVICES", ("1",))),
    ],
)
def test_requested_gpus_precedence_and_formats(env, explicit, expected):
    req = requested_gpus(env, explicit)
    assert (req.source, req.ids) == expected


def test_resolve_every_id_format():
    gpus = list_gpus(nvml3())
    assert [g.uuid for g in gpus] == [U0, U1, "MIG-5f1e2d3c-0000", U2]
    pick = lambda *ids: [g.uuid for g in resolve_ids(ids, gpus)]  # noqa: E731
    assert pick("1") == [U1]
    assert pick("CUDA2") == [U2]
    assert pick(U0) == [U0]
    assert pick("GPU-b156e653") == [U0]  # HTCondor's short UUID
    assert pick("gpu-B156E653") == [U0]
    assert pick("MIG-5f1e2d3c") == ["MIG-5f1e2d3c-0000"]
    assert pick("0", "GPU-b156") == [U0]  # one GPU named twice is one GPU


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (["7"], "no GPU with index 7"),
        (["CUDA9"], "no GPU with index 9"),
        (["GPU-ffff"], "no GPU has this UUID"),
        (["GPU-3a4"], "ambiguous"),
    ],
)
def test_unknown_or_ambiguous_ids_are_errors(ids, message):
    with pytest.raises(HarnessError, match=message):
        resolve_ids(ids, list_gpus(nvml3()))


def test_no_driver_means_no_gpus():
    # this machine has no NVIDIA driver: the real loader finds none
    gs = resolve_gpu_set({"CUDA_VISIBLE_DEVICES": "0"})
    assert gs.driver is False and gs.gpus == () and gs.sandbox_ids() == ["0"]
    assert reap(gs, ReapPolicy("own")).note == "no NVIDIA driver: nothing to reap"


# -- choosing victims: examples and a property over thousands of scenarios -------------------


def proc(pid, gpu, uid):
    return GpuProcess(pid, gpu, 0, 1 << 30, uid, f"u{uid}", f"python train.py {pid}")


def test_choose_victims_examples():
    procs = [proc(10, U0, 1000), proc(11, U0, 1001), proc(12, U1, 1000), proc(13, U0, None)]
    assert [p.pid for p in choose_victims(procs, [U0], "own", 1000)] == [10]
    assert [p.pid for p in choose_victims(procs, [U0], "all", 1000)] == [10, 11, 13]
    assert choose_victims(procs, [U0, U1], "none", 1000) == []
    assert [p.pid for p in choose_victims(procs, [U0, U1], "own", 1000, frozenset({10}))] == [12]


UUIDS = [f"GPU-{i:08x}-0000" for i in range(6)]


@st.composite
def scenarios(draw):
    n_gpus = draw(st.integers(1, 6))
    gpus = UUIDS[:n_gpus]
    procs = draw(
        st.lists(
            st.builds(
                proc,
                st.integers(2, 400),
                st.sampled_from(gpus),
                st.sampled_from([0, 1000, 1001, 1002, None]),
            ),
            max_size=30,
        )
    )
    scope = draw(st.lists(st.sampled_from(gpus), unique=True))
    mode = draw(st.sampled_from(["none", "own", "all"]))
    my_uid = draw(st.sampled_from([0, 1000, 1001]))
    protected = frozenset(draw(st.lists(st.integers(2, 400), max_size=3)))
    return procs, scope, mode, my_uid, protected


@settings(max_examples=3000, deadline=None)
@given(scenarios())
def test_no_out_of_scope_or_foreign_process_is_ever_chosen(scenario):
    procs, scope, mode, my_uid, protected = scenario
    victims = choose_victims(procs, scope, mode, my_uid, protected)
    for v in victims:
        assert v.gpu_uuid in scope, "a process on a GPU outside the cell's set"
        assert v.pid not in protected
        if mode == "own":
            assert v.uid == my_uid, "another user's process in own mode"
    if mode == "none":
        assert victims == []
    # and nothing in scope that the mode allows is missed
    eligible = {
        p.pid for p in procs if p.gpu_uuid in scope and p.pid not in protected and (mode == "all" or p.uid == my_uid)
    }
    assert {v.pid for v in victims} == (eligible if mode != "none" else set())


# -- reaping ---------------------------------------------------------------------------------


# Fake PIDs of GPU processes: above any pid_max (at most 2**22), so that no process of
# the host running the tests has them (reap checks /proc to see a killed one gone).
P = 1 << 22


def owners(table):
    return lambda pid: table.get(pid, (None, "?", "?"))


def gpu_set(nvml, ids, source="SLURM_STEP_GPUS"):
    return GpuSet(GpuRequest(source, tuple(ids)), tuple(resolve_ids(ids, list_gpus(nvml))), driver=True)


def test_reap_own_kills_only_mine_on_my_gpus_and_waits_until_gone(caplog):
    nvml = nvml3()
    nvml.devices[0].processes.update({P + 100: 2 << 30, P + 101: 1 << 30})  # mine, foreign on GPU 0
    nvml.devices[1].processes.update({P + 200: 3 << 30})  # mine on GPU 1 (not the cell's)
    table = {
        P + 100: (1000, "me", "python leftover.py"),
        P + 101: (1001, "them", "python theirs.py"),
        P + 200: (1000, "me", "x"),
    }
    killed = []

    def kill(pid, sig):
        killed.append(pid)
        nvml.kill(pid, sig)

    host = ReapHost(nvml=nvml, uid=1000, kill=kill, owner=owners(table))
    with caplog.at_level(logging.INFO, logger="ptb_harness.gpu"):
        report = reap(gpu_set(nvml, ["0"]), ReapPolicy("own", wait_seconds=2), host=host)
    assert killed == [P + 100] and report.survivors == []
    assert set(nvml.devices[0].processes) == {P + 101} and set(nvml.devices[1].processes) == {P + 200}
    line = next(r.getMessage() for r in caplog.records if "reap killed" in r.getMessage())
    for part in (f"pid {P + 100}", "user me", "gpu 0", U0, "2048 MiB", "python leftover.py"):
        assert part in line


def test_reap_all_dry_run_and_none():
    nvml = nvml3()
    nvml.devices[2].processes.update({P + 300: 1, P + 301: 1})
    table = {P + 300: (0, "root", "a"), P + 301: (1001, "them", "b")}
    killed = []
    host = ReapHost(nvml=nvml, uid=1000, kill=lambda p, s: killed.append(p), owner=owners(table))
    report = reap(gpu_set(nvml, ["CUDA2"]), ReapPolicy("all"), dry_run=True, host=host)
    assert [v.pid for v in report.victims] == [P + 300, P + 301] and killed == []
    assert reap(gpu_set(nvml, ["2"]), ReapPolicy("none"), host=host).note.startswith("reap mode none")
    assert killed == []


def test_reap_all_refuses_an_unknown_gpu_set_unless_node_scope():
    nvml = nvml3()
    nvml.devices[0].processes.update({P + 100: 1})
    unknown = GpuSet(GpuRequest("none set", None), (), driver=True)
    with pytest.raises(HarnessError, match="gpu_scope: node"):
        reap(unknown, ReapPolicy("all"), host=ReapHost(nvml=nvml, kill=lambda p, s: None))
    killed = []
    host = ReapHost(nvml=nvml, kill=lambda p, s: killed.append(p) or nvml.kill(p, s), owner=owners({}))
    reap(unknown, ReapPolicy("all", scope="node"), host=host)
    assert killed == [P + 100]


def test_own_mode_with_an_unknown_gpu_set_touches_no_gpu_of_the_node():
    """No scheduler variable names the cell's GPUs: `own` must not widen to the node's
    GPUs, where the same user may run other jobs. Our own processes sit on every card
    and stay there (the kill stand-in would remove them), so a fallback to every GPU
    shows as kills, victims and emptied cards."""
    nvml = nvml3()
    for d, pid in zip(nvml.devices, (P + 100, P + 200, P + 300), strict=True):
        d.processes[pid] = 1 << 30
    table = {pid: (1000, "me", "python other_job.py") for pid in (P + 100, P + 200, P + 300)}
    killed = []
    host = ReapHost(nvml=nvml, uid=1000, kill=lambda p, s: killed.append(p) or nvml.kill(p, s), owner=owners(table))
    unknown = GpuSet(GpuRequest("none set", None), (), driver=True)
    for dry_run in (True, False):
        report = reap(unknown, ReapPolicy("own"), dry_run=dry_run, host=host)
        assert report.victims == [] and report.scope == [] and killed == []
        assert "no GPUs" in report.note
    assert [set(d.processes) for d in nvml.devices] == [{P + 100}, {P + 200}, {P + 300}]


def test_reap_reports_processes_that_do_not_leave():
    nvml = nvml3()
    nvml.devices[0].processes.update({P + 100: 1})
    host = ReapHost(nvml=nvml, uid=5, kill=lambda p, s: None, owner=owners({P + 100: (5, "me", "z")}), poll_s=0.05)
    report = reap(gpu_set(nvml, ["0"]), ReapPolicy("own", wait_seconds=0.3), host=host)
    assert report.killed == [P + 100] and report.survivors == [P + 100]


def test_reap_never_kills_the_harness_or_its_parents():
    """A harness process (or the shell that started it) holding a CUDA context on the
    cell's GPU is ours and in scope, and still never a victim."""
    import os

    nvml = nvml3()
    me, parent = os.getpid(), os.getppid()
    nvml.devices[0].processes.update({me: 1, parent: 1, P + 100: 1})
    table = {pid: (1000, "me", "python") for pid in (me, parent, P + 100)}
    killed = []
    host = ReapHost(nvml=nvml, uid=1000, kill=lambda p, s: killed.append(p) or nvml.kill(p, s), owner=owners(table))
    report = reap(gpu_set(nvml, ["0"]), ReapPolicy("all", wait_seconds=1), host=host)
    assert [v.pid for v in report.victims] == [P + 100] and killed == [P + 100]


@pytest.mark.parametrize("mode", ["kill", "OWN", "", "own ", "al"])
def test_an_unknown_reap_mode_is_an_error_even_with_no_process_on_the_gpu(mode):
    nvml = nvml3()  # no process anywhere
    with pytest.raises(HarnessError, match="unknown reap mode"):
        ReapPolicy(mode)
    with pytest.raises(HarnessError, match="unknown reap mode"):
        choose_victims([], [U0], mode, 1000)
    with pytest.raises(HarnessError, match="unknown reap mode"):
        choose_victims([proc(10, U1, 1000)], [U0], mode, 1000)  # nothing in scope either
    bare = object.__new__(ReapPolicy)  # a policy that skipped its own check
    object.__setattr__(bare, "mode", mode)
    object.__setattr__(bare, "scope", "cell")
    object.__setattr__(bare, "wait_seconds", 1.0)
    with pytest.raises(HarnessError, match="unknown reap mode"):
        reap(gpu_set(nvml, ["0"]), bare, host=ReapHost(nvml=nvml, kill=lambda p, s: None))


@settings(max_examples=300, deadline=None)
@given(mode=st.text(max_size=8), scenario=scenarios())
def test_choose_victims_accepts_only_the_three_modes(mode, scenario):
    procs, scope, _, my_uid, protected = scenario
    if mode in ("none", "own", "all"):
        choose_victims(procs, scope, mode, my_uid, protected)
    else:
        with pytest.raises(HarnessError, match="unknown reap mode"):
            choose_victims(procs, scope, mode, my_uid, protected)


def test_reap_policy_rejects_an_unknown_scope_or_a_negative_wait():
    with pytest.raises(HarnessError, match="unknown GPU scope"):
        ReapPolicy("own", scope="rack")
    with pytest.raises(HarnessError, match="wait_seconds"):
        ReapPolicy("own", wait_seconds=-1)


def test_the_harness_never_calls_nvidia_smi():
    """Reaping goes through NVML; an `nvidia-smi` spawn (as upstream's reaper did) may
    appear in comments and docstrings only. Reads the code's tokens, not its text."""
    from pathlib import Path

    import ptb_harness

    assert _nvidia_smi_in_code(Path(ptb_harness.__file__).parent) == []


def _nvidia_smi_in_code(root):
    """`file:line` of every string in code (not a docstring, not a comment) naming nvidia-smi."""
    import io
    import tokenize

    statement_start = (tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE, tokenize.NL, tokenize.ENCODING)
    found = []
    for path in sorted(root.rglob("*.py")):
        tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
        for i, tok in enumerate(tokens):
            if tok.type != tokenize.STRING or "nvidia-smi" not in tok.string.lower():
                continue
            alone = (i == 0 or tokens[i - 1].type in statement_start) and tokens[i + 1].type == tokenize.NEWLINE
            if not alone:  # a string that is a whole statement is a docstring
                found.append(f"{path.name}:{tok.start[0]}")
    return found


def test_the_nvidia_smi_check_finds_a_call(tmp_path):
    (tmp_path / "m.py").write_text(
        '"""Docs may say nvidia-smi."""\n# so may comments: nvidia-smi\nimport subprocess\n\n\n'
        'def f():\n    """nvidia-smi in a docstring"""\n    subprocess.run(["nvidia-smi", "-L"])\n'
    )
    assert _nvidia_smi_in_code(tmp_path) == ["m.py:8"]


# -- monitor and preflight ---------------------------------------------------------------------


def test_monitor_writes_rows_for_the_cells_gpus_only(tmp_path):
    nvml = nvml3()
    nvml.devices[1].processes.update({42: 5 << 30})
    path = tmp_path / "gpu_monitor.csv"
    gpus = [g for g in list_gpus(nvml) if g.uuid == U1]
    import time

    with GpuMonitor(nvml, gpus, path, "solve", 0.05) as mon:
        time.sleep(0.3)
    rows = list(csv.DictReader(path.open()))
    assert mon.samples >= 3 and len(rows) == mon.samples
    assert {r["gpu_uuid"] for r in rows} == {U1}
    assert rows[0]["pids"] == "42" and rows[0]["memory_used_mib"] == "5120" and rows[0]["power_w"] == "123.4"
    assert not GpuMonitor(None, gpus, tmp_path / "x.csv", "solve", 1).active


@pytest.mark.parametrize(
    ("output", "ok", "reason"),
    [
        ("noise\nPREFLIGHT OK: 1 GPUs: NVIDIA H200\n", True, "1 GPUs: NVIDIA H200"),
        ("PREFLIGHT FAIL: 8 GPUs visible, expected 1\n", False, "8 GPUs visible, expected 1"),
        ("Traceback...\nImportError: libcuda\n", False, "without a verdict"),
        ("", False, "without a verdict"),
    ],
)
def test_preflight_verdict(output, ok, reason):
    got_ok, got_reason = verdict(output)
    assert got_ok is ok and reason in got_reason


# -- leases ------------------------------------------------------------------------------------


def test_leases_give_each_job_its_own_card_and_free_them_when_the_holder_dies(tmp_path):
    import signal
    import subprocess
    import sys

    with lease_gpus(["0", "1"], 1, tmp_path) as first, lease_gpus(["0", "1"], 1, tmp_path) as second:
        assert first == ["0"] and second == ["1"]
        with (
            pytest.raises(HarnessError, match="no 1 free GPU"),
            lease_gpus(["0", "1"], 1, tmp_path, timeout_s=0.3, poll_s=0.1),
        ):
            pass
    with lease_gpus(["0", "1"], 2, tmp_path) as both:
        assert both == ["0", "1"]

    code = (
        "import pathlib, time\nfrom ptb_harness.gpu.lease import lease_gpus\n"
        f"with lease_gpus(['0'], 1, pathlib.Path('{tmp_path}')):\n    print('held', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(HarnessError), lease_gpus(["0"], 1, tmp_path, timeout_s=0.2, poll_s=0.05):
        pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with lease_gpus(["0"], 1, tmp_path, timeout_s=2, poll_s=0.05) as ids:
        assert ids == ["0"], "a killed job's lease is free again"


def test_pool_smaller_than_the_cell_is_an_error(tmp_path):
    with pytest.raises(HarnessError, match="gpu_pool has 1 GPU"), lease_gpus(["0"], 2, tmp_path):
        pass
