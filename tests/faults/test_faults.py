"""Fault injection: real processes, real signals, real Snakemake runs on the local profile.

Each test injects one fault of issue 8 and checks: the cell's recorded outcome and its
evidence (read by `ptb-harness status`, as a user would), the harness's one-line log
message, that no finished stage's file is lost or half-written, and that the recovery
command in docs/recovery.md completes only what is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, campaign_config, cell_dir, make_workdir, snakemake, write_agent, write_config, write_task

from ptb_harness.campaign.config import load_config_files
from ptb_harness.results.status import campaign_status

pytestmark = pytest.mark.slow


def outcomes(workdir: Path) -> dict[str, tuple[str, str]]:
    """agent/task/model/run -> (outcome, evidence), as `ptb-harness status` reads them."""
    statuses = campaign_status(load_config_files(workdir))
    return {f"{s.cell.agent}/{s.cell.task}/{s.cell.model}/{s.cell.run}": (s.outcome, s.evidence) for s in statuses}


def snakemake_popen(workdir: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "CONDOR_CONFIG": os.devnull, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    cmd += ["--profile", str(REPO / "profiles" / "local"), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=workdir)


def wait_for(predicate, timeout: float = 60, what: str = "") -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def state(cell: Path, stage: str) -> dict:
    try:
        return json.loads((cell / f"{stage}.state.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def snapshot_files(cell: Path, names=("solve.json", "solve_out.txt")) -> dict[str, bytes]:
    return {n: (cell / n).read_bytes() for n in names}


def pid_gone(pid: int) -> bool:
    # an orphan re-parented to this process (a subreaper while a test ran run_budgeted here)
    # stays a zombie until reaped
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)  # signal 0: a liveness probe of our own child's pid, sends nothing
    except ProcessLookupError:
        return True
    return False


# -- faults 1, 2, 4, 8: one campaign run ------------------------------------------------


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory):
    """exit0 and exit3 agents, a self-SIGKILLing and an overrunning one, on a task whose
    scorer works, plus exit0 on a task whose scorer crashes on every attempt."""
    root = make_workdir(tmp_path_factory.mktemp("faults") / "campaign")
    write_config(root, campaign_config(agents=["exit0", "exit3", "selfkill", "overrun"], tasks=["fake", "broken"]))
    res = snakemake(root)
    return root, res


def test_1_4_agent_exits_nonzero_and_leaves_no_model(mixed_run):
    root, res = mixed_run
    assert res.returncode != 0  # cells without a score: the run says so
    outcome, why = outcomes(root)["exit3/fake/m1/1"]
    assert outcome == "agent_failed" and why == "agent exited with code 3; no final model"
    solve = json.loads((cell_dir(root, "exit3") / "solve.json").read_text())
    assert solve["exit_code"] == 3 and solve["final_model_files"] == 0
    log = (cell_dir(root, "exit3") / "logs" / "evaluate.log").read_text()
    assert "evaluate failed: nothing to score: agent exited with code 3 and left no final model" in log


def test_2_overrun_is_stopped_and_still_scored(mixed_run):
    root, _ = mixed_run
    solve = json.loads((cell_dir(root, "overrun") / "solve.json").read_text())
    assert solve["status"] == "timeout" and solve["description"] == "stopped at its time limit (SIGKILL)"
    assert outcomes(root)["overrun/fake/m1/1"][0] == "scored"  # it left a model before the limit


def test_8_scorer_crashing_on_every_attempt_is_infra_failed(mixed_run):
    root, _ = mixed_run
    cell = cell_dir(root, "exit0", task="broken")
    evaluate = json.loads((cell / "evaluate.json").read_text())
    assert [a["ok"] for a in evaluate["attempts"]] == [False] * 4
    statuses = {(s.cell.agent, s.cell.task): (s.outcome, s.evidence) for s in campaign_status(load_config_files(root))}
    outcome, why = statuses[("exit0", "broken")]
    assert outcome == "infra_failed" and why.startswith("scorer: no valid metrics after 4 attempts")
    assert (cell / "solve.json").exists() and (cell / "final_model").is_dir()  # solve outputs kept
    # recovery: the same command again redoes only the unscored evaluations, never a solve
    dry = snakemake(root, "-n")
    assert "solve " not in dry.stdout and "evaluate" in dry.stdout


# -- fault 3 ----------------------------------------------------------------------------


def test_3_cuda_preflight_failure_is_infra_failed_and_retried(workdir):
    write_config(workdir, campaign_config(num_gpus=[1]))
    res = snakemake(workdir)
    assert res.returncode != 0
    outcome, why = outcomes(workdir)["exit0/fake/m1/1"]
    assert outcome == "infra_failed" and why.startswith("CUDA preflight failed, agent not started")
    log = workdir / "results" / "cells" / "exit0" / "fake" / "m1" / "0.0005h-1gpu-run1" / "logs" / "solve.log"
    assert "solve failed: CUDA preflight failed, agent not started: no NVIDIA driver" in log.read_text()
    assert "solve " in snakemake(workdir, "-n").stdout  # a rerun tries the cell again


# -- fault 5 and 6: SIGKILL of the Snakemake main process ------------------------------


def test_5_sigkill_of_snakemake_during_a_solve_then_rerun(workdir, tmp_path):
    # the slow agent solves when the test releases it (runtime none: it sees the host's
    # files), not after a fixed sleep: on busy cores exit0's scoring can take longer than
    # any sleep, and then no moment has both
    release = tmp_path / "release"
    write_agent(
        workdir,
        "slow",
        f"until [ -e {release} ]; do sleep 0.1; done\n"
        "mkdir -p final_model && echo '{\"score\": 0.6}' > final_model/config.json",
    )
    write_config(workdir, campaign_config(agents=["exit0", "slow"], hours=[0.02]))
    done_cell, slow_cell = cell_dir(workdir, "exit0", hours="0.02"), cell_dir(workdir, "slow", hours="0.02")
    # room for both cells' jobs at once (a solve or evaluate takes site.*_resources.cpus, 8,
    # capped to the cores: with 2, one job at a time, and a slow solve started first would
    # hold exit0's jobs back until it ends)
    proc = snakemake_popen(workdir, "--cores", "16")
    wait_for(lambda: (done_cell / "metrics.json").exists() and state(slow_cell, "solve").get("state") == "running",
             what="exit0 scored and slow solving")  # fmt: skip
    finished = snapshot_files(done_cell, ("solve.json", "metrics.json"))
    proc.send_signal(signal.SIGKILL)  # the Snakemake main process only: its job is orphaned
    proc.wait()
    orphan = state(slow_cell, "solve")["pid"]
    assert outcomes(workdir)["slow/fake/m1/1"][0] == "running"  # the orphaned job still runs
    # a rerun started now must not solve the same cell a second time beside it
    res = snakemake(workdir, "--unlock")
    assert res.returncode == 0, res.stderr
    res = snakemake(workdir, "--rerun-incomplete")
    assert res.returncode != 0
    assert "another solve of this cell is running" in res.stderr, res.stderr[-2000:]
    release.touch()  # the orphan solves and ends
    wait_for(lambda: pid_gone(orphan), what="the orphaned solve to end")
    # recovery (docs/recovery.md): unlock, then rerun the incomplete jobs
    assert snakemake(workdir, "--unlock").returncode == 0
    res = snakemake(workdir, "--rerun-incomplete")
    assert res.returncode == 0, res.stderr[-3000:]
    assert snapshot_files(done_cell, ("solve.json", "metrics.json")) == finished  # never redone
    assert outcomes(workdir)["slow/fake/m1/1"] == ("scored", "accuracy 0.6")
    again = snakemake(workdir)
    assert "Nothing to be done" in again.stdout + again.stderr


def test_6_sigkill_during_an_evaluate_attempt_does_not_repeat_the_solve(workdir):
    slow_eval = """
        import argparse, json, pathlib, time
        ap = argparse.ArgumentParser()
        ap.add_argument("--model-path"); ap.add_argument("--json-output-file"); ap.add_argument("--max-tokens")
        a = ap.parse_args()
        time.sleep(3)
        pathlib.Path(a.json_output_file).write_text(json.dumps({"accuracy": 0.5}))
    """
    write_task(workdir, "slowscore", slow_eval)
    write_config(workdir, campaign_config(tasks=["slowscore"]))
    cell = cell_dir(workdir, "exit0", task="slowscore")
    proc = snakemake_popen(workdir)
    wait_for(lambda: state(cell, "evaluate").get("state") == "running", what="an evaluate attempt")
    time.sleep(0.5)
    solved = snapshot_files(cell)
    proc.send_signal(signal.SIGKILL)  # the Snakemake main process only
    proc.wait()
    wait_for(lambda: pid_gone(state(cell, "evaluate")["pid"]), what="the orphaned evaluate to end")
    assert snakemake(workdir, "--unlock").returncode == 0
    dry = snakemake(workdir, "-n", "--rerun-incomplete")
    assert "evaluate" in dry.stdout and "solve " not in dry.stdout, dry.stdout
    res = snakemake(workdir, "--rerun-incomplete")
    assert res.returncode == 0, res.stderr[-3000:]
    assert snapshot_files(cell) == solved
    assert outcomes(workdir)["exit0/slowscore/m1/1"] == ("scored", "accuracy 0.5")


# -- fault 7: a harness file replaced mid-solve ----------------------------------------


def test_7_harness_file_replaced_mid_solve(workdir, tmp_path):
    """`ptb-harness run` runs from a frozen snapshot: replacing the checkout's files while a
    cell runs changes nothing (the Slurm variant is in tests/slurm)."""
    write_agent(workdir, "slow", "sleep 2; mkdir -p final_model && echo '{\"score\": 0.4}' > final_model/config.json")
    write_config(workdir, campaign_config(agents=["slow"], hours=[0.005]))
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(REPO), str(checkout)], check=True)
    for rel in ("src", "workflow", "Snakefile", "config/config.schema.yaml"):  # the working tree, edits included
        subprocess.run(["cp", "-a", str(REPO / rel), str(checkout / Path(rel).parent)], check=True)
    env = {**os.environ, "CONDOR_CONFIG": os.devnull, "PYTHONPATH": str(checkout / "src")}
    cmd = [sys.executable, "-m", "ptb_harness", "run", "--workdir", str(workdir)]
    cmd += ["--profile", str(checkout / "profiles" / "local")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    cell = cell_dir(workdir, "slow", hours="0.005")
    wait_for(lambda: state(cell, "solve").get("state") == "running", what="the solve")
    for rel in ("workflow/scripts/evaluate.py", "src/ptb_harness/stages/evaluate.py", "workflow/rules/evaluate.smk"):
        (checkout / rel).write_text("raise SystemExit('replaced mid-run')\n")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert outcomes(workdir)["slow/fake/m1/1"] == ("scored", "accuracy 0.4")


# -- fault 9: invalid metrics ----------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        ('{"accuracy": 0.5', "not valid JSON"),
        ('{"accuracy": "0.5"}', "accuracy"),
        ('{"accuracy": 1.5}', "accuracy"),
        ('{"accuracy": NaN}', "accuracy"),
        ('{"score": 0.5}', "accuracy"),
    ],
    ids=["truncated", "string", "above-1", "nan", "no-accuracy"],
)
def test_9_invalid_metrics_never_become_metrics_json(workdir, written, problem):
    bad = f"""
        import argparse, pathlib
        ap = argparse.ArgumentParser()
        ap.add_argument("--model-path"); ap.add_argument("--json-output-file"); ap.add_argument("--max-tokens")
        a = ap.parse_args()
        pathlib.Path(a.json_output_file).write_text({written!r})
    """
    write_task(workdir, "badmetrics", bad, {"evaluate": {"ladder": [{"attempts": 2, "max_tokens": None}]}})
    write_config(workdir, campaign_config(tasks=["badmetrics"]))
    res = snakemake(workdir)
    assert res.returncode != 0
    cell = cell_dir(workdir, "exit0", task="badmetrics")
    assert not (cell / "metrics.json").exists()
    outcome, why = outcomes(workdir)["exit0/badmetrics/m1/1"]
    assert outcome == "infra_failed" and problem in why, why
    assert (cell / "solve.json").exists()


# -- fault 10: scratch too small / full ------------------------------------------------


def test_10_scratch_below_its_minimum(workdir, tmp_path):
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text((REPO / "profiles" / "local" / "config.yaml").read_text())
    (profile / "site.yaml").write_text(json.dumps({"site": {"min_tmp_free_gb": 10**9}}))
    res = snakemake(workdir, profile_dir=profile)
    assert res.returncode != 0
    outcome, why = outcomes(workdir)["exit0/fake/m1/1"]
    assert outcome == "infra_failed" and "site.tmp_root" in why and "below site.min_tmp_free_gb" in why


@pytest.fixture
def tiny_tmpfs(tmp_path):
    mnt = tmp_path / "scratch"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_10_disk_full_while_preparing_the_job_dir(workdir, tmp_path, tiny_tmpfs):
    payload = workdir / "agents" / "exit0" / "payload"
    payload.mkdir()
    (payload / "weights.bin").write_bytes(os.urandom(1 << 20))  # 1 MiB into 256 KiB
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text((REPO / "profiles" / "local" / "config.yaml").read_text())
    (profile / "site.yaml").write_text(json.dumps({"site": {"tmp_root": str(tiny_tmpfs), "min_tmp_free_gb": 0}}))
    res = snakemake(workdir, profile_dir=profile)
    assert res.returncode != 0
    outcome, why = outcomes(workdir)["exit0/fake/m1/1"]
    assert outcome == "infra_failed"
    assert "preparing the job dir" in why and "No space left on device" in why, why
    assert list(tiny_tmpfs.iterdir()) == []  # the half-copied job dir is gone
    log = (cell_dir(workdir, "exit0") / "logs" / "solve.log").read_text()
    assert "Traceback" not in log


# -- fault 11: results dir not writable ------------------------------------------------


def test_11_results_dir_not_writable_stops_before_anything_starts(workdir, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    write_config(workdir, campaign_config(paths={"results_dir": str(blocker / "results")}))
    res = snakemake(workdir)
    assert res.returncode != 0
    [line] = [x for x in res.stderr.splitlines() if x.startswith("config error:")]
    assert line == f"config error: paths.results_dir: cannot create {blocker}/results: {blocker} is not a directory"
    assert "Traceback" not in res.stderr


# -- fault 12: two Snakemake processes at once -----------------------------------------


def test_12_a_second_snakemake_on_the_same_campaign_refuses(workdir, tmp_path):
    release = tmp_path / "release"  # the first run's solve ends when the second has been refused
    write_agent(
        workdir,
        "slow",
        f"until [ -e {release} ]; do sleep 0.1; done\n"
        "mkdir -p final_model && echo '{\"score\": 0.3}' > final_model/config.json",
    )
    write_config(workdir, campaign_config(agents=["slow"], hours=[0.02]))
    cell = cell_dir(workdir, "slow", hours="0.02")
    first = snakemake_popen(workdir)
    wait_for(lambda: state(cell, "solve").get("state") == "running", what="the first run's solve")
    second = snakemake(workdir)
    assert second.returncode != 0
    # Snakemake refuses either at its lock or, when it reaches the check of incomplete
    # outputs first (seen on a loaded machine), at the first run's half-made outputs; both
    # stop it before any job starts
    assert "Directory cannot be locked" in second.stderr or "seem to be incomplete" in second.stderr, second.stderr
    assert "Submitted" not in second.stderr and "rule solve" not in second.stdout + second.stderr
    release.touch()
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err[-3000:]
    assert outcomes(workdir)["slow/fake/m1/1"] == ("scored", "accuracy 0.3")


# -- fault 13: a cell dir edited by hand -----------------------------------------------


def test_13_hand_edits_between_runs(workdir):
    write_config(workdir, campaign_config(runs=[1, 2]))
    assert snakemake(workdir).returncode == 0
    run1, run2 = cell_dir(workdir, "exit0"), cell_dir(workdir, "exit0").with_name("0.0005h-0gpu-run2")
    (run1 / "metrics.json").unlink()
    (run2 / "solve.json").unlink()
    seen = outcomes(workdir)
    assert seen["exit0/fake/m1/1"][0] == "pending" and "not scored yet" in seen["exit0/fake/m1/1"][1]
    # a score only counts with the records that vouch for it
    assert seen["exit0/fake/m1/2"] == (
        "infra_failed",
        "records disagree (tampered or edited by hand): metrics.json without solve.json",
    )
    solve1 = (run1 / "solve.json").read_bytes()
    dry = snakemake(workdir, "-n")
    # a plain rerun rescores run 1 and never redoes a 10-hour solve on its own
    assert "evaluate        1" in dry.stdout and "\nsolve " not in dry.stdout, dry.stdout
    assert snakemake(workdir).returncode == 0
    assert (run1 / "solve.json").read_bytes() == solve1  # run 1's solve kept
    assert not (run2 / "solve.json").exists()
    assert outcomes(workdir)["exit0/fake/m1/1"][0] == "scored"
    assert outcomes(workdir)["exit0/fake/m1/2"][0] == "infra_failed"
