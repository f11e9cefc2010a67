"""Resource caps in real campaign runs (`ptb-harness run`, the real Snakemake), under the
isolating runtime `bwrap` and under `none` (a cgroup holds a `none` agent too): each
agent below tries one excess, all cells of ONE campaign per runtime.

- 2,000 processes, and a 4 GiB allocation: each stops at the cell's cgroup cap (small
  caps here, so the machine is not stressed: what is shown is that the cap holds and is
  named, from the cgroup's event files), and the cell is `agent_failed` naming it;
- 512 MiB into /dev/shm (bwrap): the sandbox's own /dev/shm holds at most its size;
- a final_model of 400,000 files: refused by count, in a fraction of the time it took
  the agent to make them. The files are hard links of one file on a tmpfs scratch, the
  fastest way to make 400,000 names (creating them on this VM's loaded ext4 took 97 s);
  the delivery is refused from its count however they were made.

The harness itself never dies of any of it, and removes every cgroup it made. Needs root
and the memory and pids controllers (CI: root on cgroup v1); without them the caps'
cells are skipped, saying why, and the file count is still checked.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import campaign_config, make_workdir, write_agent, write_config
from conftest import cell_dir as _cell_dir
from hostile import harness_run, ptb, write_profile

from ptb_harness.runtime.cgroups import this_machine

pytestmark = pytest.mark.slow

HOURS = "0.01"  # 36 s: room to make 400,000 links on a loaded machine
MEMORY_MB, PIDS, SHM_MB = 256, 128, 64
PLACEMENT = this_machine()
CGROUPS = not PLACEMENT.missing
MODEL = "mkdir -p final_model && echo '{\"score\": %s}' > final_model/config.json\n"

AGENTS = {
    "fork_bomb": """
python - <<'EOF'
import os, time
n = 0
try:
    for _ in range(2000):
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
        n += 1
except OSError as e:
    print(f"fork refused after {n} children: {e}", flush=True)
print(f"started {n} of 2000", flush=True)
EOF
""",
    # bytes * n fills every page: all 4 GiB would be touched
    "mem_hog": "exec python -c 'x = b\"x\" * (4 << 30); print(len(x))'\n",
    "shm_hog": """
head -c 536870912 /dev/zero > /dev/shm/fill 2>/dev/null
echo "shm held $(stat -c %s /dev/shm/fill) bytes"
rm -f /dev/shm/fill
"""
    + MODEL % "0.3",
    "many_files": MODEL % "0.9"
    + """
echo "nofile $(ulimit -n) $(ulimit -Hn)"
python - <<'EOF'
import os
top = os.open("final_model", os.O_RDONLY)
for d in range(4):
    os.mkdir(f"final_model/d{d}")
dirs = [os.open(f"final_model/d{d}", os.O_RDONLY) for d in range(4)]
for i in range(400_000):
    os.link("config.json", f"f{i}", src_dir_fd=top, dst_dir_fd=dirs[i % 4])
print("made 400000 files", flush=True)
EOF
""",
}
CAPPED = {"fork_bomb", "mem_hog"}


def cell_dir(workdir: Path, agent: str) -> Path:
    return _cell_dir(workdir, agent, hours=HOURS)


@pytest.fixture(scope="module", params=["bwrap", "none"])
def capped(request, tmp_path_factory):
    runtime = request.param
    root = tmp_path_factory.mktemp(f"caps-{runtime}")
    workdir = make_workdir(root / "campaign")
    agents = [a for a in AGENTS if (runtime == "bwrap" or a != "shm_hog") and (CGROUPS or a not in CAPPED)]
    for name in agents:
        write_agent(workdir, name, AGENTS[name])
    write_config(workdir, campaign_config(agents=["exit0", *agents], hours=[float(HOURS)]))
    scratch = Path(tempfile.mkdtemp(prefix="ptb-caps-", dir="/dev/shm"))  # a tmpfs (see the docstring)
    limits = {"memory_mb": MEMORY_MB, "pids_max": PIDS, "shm_mb": SHM_MB}
    profile = write_profile(
        root, runtime=runtime, tmp_root=str(scratch), agent_limits=limits,
        solve_resources={"cpus": 1}, evaluate_resources={"cpus": 1},
    )  # fmt: skip
    try:
        run = harness_run(workdir, profile)
        seen = json.loads(ptb(workdir, profile, "status", "--json"))
        outcomes = {c["agent"]: (c["outcome"], c["evidence"]) for c in seen["cells"]}
        yield runtime, workdir, run, outcomes
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def solve(workdir: Path, agent: str) -> dict:
    return json.loads((cell_dir(workdir, agent) / "solve.json").read_text())


def test_the_harness_records_every_cell_whatever_its_agent_hit(capped):
    runtime, workdir, run, outcomes = capped
    assert "Traceback" not in run.stderr.replace("Traceback (most recent call last)", ""), run.stderr[-3000:]
    for agent in outcomes:
        assert (cell_dir(workdir, agent) / "solve.json").exists(), (agent, run.stderr[-3000:])
    assert outcomes["exit0"] == ("scored", "accuracy 0.75")
    limits = solve(workdir, "exit0")["limits"]
    assert limits["memory_bytes"] == MEMORY_MB * 2**20 and limits["pids_max"] == PIDS and limits["hit"] is None
    assert limits["rlimits"]["CORE"] == [0, 0] and limits["rlimits"]["NOFILE"][0] <= 65536
    # the record says what the agent got (65536, or the harness's hard limit where it may not raise it)
    trace = (cell_dir(workdir, "many_files") / "solve_out.txt").read_text()
    seen = trace.split("nofile ")[1].split()[:2]
    assert [int(n) for n in seen] == solve(workdir, "many_files")["limits"]["rlimits"]["NOFILE"], seen
    if CGROUPS:
        assert limits["no_cgroup"] is None and set(limits["cgroup"]["dirs"]) == {"memory", "pids"}


def test_every_cgroup_made_is_removed(capped):
    _runtime, workdir, _run, outcomes = capped
    if not CGROUPS:
        pytest.skip(f"no cgroup can be made here: {PLACEMENT.missing}")
    for agent in outcomes:
        dirs = solve(workdir, agent)["limits"]["cgroup"]["dirs"].values()
        assert dirs and not [d for d in dirs if Path(d).exists()], agent
        assert all(f"ptb-{agent}.fake.m1.{HOURS}h-0gpu-run1-attempt1-" in d for d in dirs)


@pytest.mark.skipif(not CGROUPS, reason=f"no cgroup can be made here: {PLACEMENT.missing}")
def test_two_thousand_processes_stop_at_the_process_cap(capped):
    _runtime, workdir, _run, outcomes = capped
    outcome, evidence = outcomes["fork_bomb"]
    assert outcome == "agent_failed" and f"the agent hit its process cap ({PIDS}; " in evidence, evidence
    cg = solve(workdir, "fork_bomb")["limits"]["cgroup"]
    assert cg["hits"]["process"] >= 1 and cg["pids_peak"] <= PIDS
    trace = (cell_dir(workdir, "fork_bomb") / "solve_out.txt").read_text()
    started = int(trace.split("started ")[1].split()[0])
    assert "fork refused after" in trace and started < PIDS, trace[-2000:]


@pytest.mark.skipif(not CGROUPS, reason=f"no cgroup can be made here: {PLACEMENT.missing}")
def test_a_4_gib_allocation_stops_at_the_memory_cap(capped):
    _runtime, workdir, _run, outcomes = capped
    outcome, evidence = outcomes["mem_hog"]
    assert outcome == "agent_failed", evidence
    # the kernel kills the hog, and under memory pressure on a busy machine sometimes the
    # shell that started it too: the count is the kernel's, at least one
    capped_line = rf"the agent hit its memory cap \({MEMORY_MB} MiB; (\d+) process(es)? killed\); no final model"
    hit = re.search(capped_line, evidence)
    assert hit and int(hit.group(1)) >= 1, evidence
    record = solve(workdir, "mem_hog")
    assert record["limits"]["cgroup"]["memory_peak_bytes"] <= MEMORY_MB * 2**20
    # the allocating process was killed (by the kernel, in the cell's cgroup), not the harness
    assert (record["status"], record["signal"]) == ("signal", 9) or record["exit_code"] == 137, record


def test_dev_shm_holds_at_most_its_size(capped):
    runtime, workdir, _run, outcomes = capped
    if runtime != "bwrap":
        pytest.skip("runtime none shares the host's /dev/shm (counted in the cell's memory cgroup while held)")
    trace = (cell_dir(workdir, "shm_hog") / "solve_out.txt").read_text()
    assert f"shm held {SHM_MB * 2**20} bytes" in trace, trace[-1000:]
    assert outcomes["shm_hog"] == ("scored", "accuracy 0.3")  # it went on within its caps


def test_a_400000_file_model_is_refused_by_count_at_once(capped):
    _runtime, workdir, _run, outcomes = capped
    outcome, evidence = outcomes["many_files"]
    assert outcome == "agent_failed", evidence
    assert "final_model holds more than 10000 files and directories; nothing delivered" in evidence
    record = solve(workdir, "many_files")
    assert record["final_model_files"] == 0
    assert not [
        p for p in (cell_dir(workdir, "many_files") / "final_model").iterdir() if p.name != ".snakemake_timestamp"
    ]
    # the refusal walked 10,001 entries: a fraction of the agent's time making 400,000
    assert record["delivery_s"] < record["duration_s"] / 2, (record["delivery_s"], record["duration_s"])
    files = json.loads((cell_dir(workdir, "many_files") / "agent_files.json").read_text())
    assert files["problem"] is None  # final_model is not among the agent's own files


@pytest.mark.parametrize("mode", ["auto", "required"])
def test_without_a_cgroup_a_run_warns_once_or_refuses(tmp_path, mode):
    """No cgroup can be made (here: a parent that does not exist, the stand-in for a
    non-root harness without delegation): `auto` prints ONE warning per run and the cells
    run on rlimits; `required` refuses each solve in one line (infra_failed)."""
    workdir = make_workdir(tmp_path / "campaign")
    write_config(workdir, campaign_config(agents=["exit0", "exit3"]))
    limits = {"cgroup": mode, "cgroup_parent": "/ptb-no-such-cgroup"}
    profile = write_profile(tmp_path, runtime="none", agent_limits=limits)
    run = harness_run(workdir, profile)
    seen = json.loads(ptb(workdir, profile, "status", "--json"))
    outcomes = {c["agent"]: (c["outcome"], c["evidence"]) for c in seen["cells"]}
    if mode == "auto":
        assert run.stderr.count("WARNING: no cgroup can be made for the cells' agents on this host (") == 1
        assert "site.agent_limits.cgroup_parent /ptb-no-such-cgroup is not a cgroup" in run.stderr
        assert outcomes["exit0"] == ("scored", "accuracy 0.75")
        limits = json.loads((_cell_dir(workdir, "exit0") / "solve.json").read_text())["limits"]
        assert limits["cgroup"] is None and "is not a cgroup" in limits["no_cgroup"] and limits["rlimits"]["CORE"]
    else:
        assert "WARNING: no cgroup" not in run.stderr
        for agent in ("exit0", "exit3"):
            outcome, evidence = outcomes[agent]
            assert outcome == "infra_failed" and "site.agent_limits.cgroup is required, but no cgroup" in evidence
