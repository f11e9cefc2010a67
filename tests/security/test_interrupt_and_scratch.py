"""Two attacks (or accidents) that need a campaign of their own: Ctrl-C in the middle of
a solve, and an agent that fills its scratch (a small tmpfs). Real Snakemake runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO, campaign_config, cell_dir, make_workdir, snakemake, write_agent, write_config
from hostile import delivered, ptb, write_profile

pytestmark = pytest.mark.slow


def wait_for(predicate, timeout: float = 60, what: str = "") -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def state(cell, stage: str) -> dict:
    try:
        return json.loads((cell / f"{stage}.state.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def test_ctrl_c_mid_solve_is_recorded_cleaned_and_redone(tmp_path):
    workdir = make_workdir(tmp_path / "campaign")
    write_agent(workdir, "slow", "echo started; sleep 60; mkdir -p final_model && echo '{}' > final_model/config.json")
    write_config(workdir, campaign_config(agents=["slow"], hours=[0.02]))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    profile = write_profile(tmp_path, runtime="bwrap", tmp_root=str(scratch))
    cell = cell_dir(workdir, "slow", hours="0.02")
    env = {**os.environ, "CONDOR_CONFIG": os.devnull}
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    cmd += ["--profile", str(profile)]
    # its own session, as a terminal's foreground job: Ctrl-C reaches its whole process group
    run = subprocess.Popen(
        cmd, env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        wait_for(
            lambda: (
                (cell / ".solve_out.txt.partial").exists()
                and "started" in (cell / ".solve_out.txt.partial").read_text()
            ),
            what="the agent",
        )
        os.killpg(run.pid, signal.SIGINT)
        run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert state(cell, "solve")["state"] == "interrupted" and state(cell, "solve")["signal"] == signal.SIGINT
    assert list(scratch.iterdir()) == [], "the job dir is removed"
    status = json.loads(ptb(workdir, profile, "status", "--json"))["cells"][0]
    assert status["outcome"] == "infra_failed" and status["evidence"].startswith("solve interrupted (signal 2)")
    assert status["evidence"].endswith("a rerun redoes it")
    # the rerun redoes it (a new try, and the leaderboard says so)
    write_agent(workdir, "slow", "mkdir -p final_model && echo '{\"score\": 0.6}' > final_model/config.json")
    targets = ptb(workdir, profile, "status", "--targets").split()
    res = snakemake(workdir, "--rerun-incomplete", *targets, profile_dir=profile)
    assert res.returncode == 0, res.stderr[-3000:]
    solve = json.loads((cell / "solve.json").read_text())
    assert solve["attempt"] == 2 and solve["earlier_attempts"][0]["status"] == "interrupted (signal 2)"
    assert json.loads(ptb(workdir, profile, "status", "--json"))["cells"][0]["outcome"] == "scored"


@pytest.fixture
def small_tmpfs(tmp_path):
    mnt = tmp_path / "scratch"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.parametrize("runtime", ["bwrap", "none"])
def test_an_agent_that_fills_its_scratch_fails_with_its_trace_kept(tmp_path, small_tmpfs, runtime):
    workdir = make_workdir(tmp_path / "campaign")
    write_agent(
        workdir,
        "filler",
        """
        mkdir -p final_model && echo '{"score": 0.9}' > final_model/config.json
        echo "filling"
        dd if=/dev/zero of="$HOME/fill" bs=1M 2>&1
        echo "still talking after the disk filled"
        """,
    )
    write_config(workdir, campaign_config(agents=["filler"]))
    profile = write_profile(tmp_path, runtime=runtime, tmp_root=str(small_tmpfs), min_tmp_free_gb=0)
    res = snakemake(workdir, profile_dir=profile)
    assert res.returncode != 0  # no score
    status = json.loads(ptb(workdir, profile, "status", "--json"))["cells"][0]
    assert status["outcome"] == "agent_failed", status
    assert "the agent filled its scratch (0.0" in status["evidence"] and "GB)" in status["evidence"]
    cell = cell_dir(workdir, "filler")
    trace = (cell / "solve_out.txt").read_text()
    assert "No space left on device" in trace and "still talking after the disk filled" in trace
    assert delivered(cell) == []  # what it left may be cut short: not scored
    assert list(small_tmpfs.iterdir()) == [], "the job dir is removed"
    assert "Traceback" not in (cell / "logs" / "solve.log").read_text()
