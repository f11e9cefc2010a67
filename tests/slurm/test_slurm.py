"""The workflow through a real Slurm cluster (.ci/slurm.sh starts one on localhost).

The profile is profiles/slurm with the CI's partition and small limits, and the `none`
runtime (no apptainer on CI machines) (.ci/slurm.sh): profiles/slurm with the CI's
partition and small limits, and the `none` runtime (no apptainer on CI machines)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, campaign_config, cell_dir, make_workdir, snakemake, write_agent, write_config

pytestmark = [pytest.mark.slow, pytest.mark.slurm]


def slurm_answers() -> bool:
    if not shutil.which("scontrol"):
        return False
    res = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
    return " is UP" in res.stdout


@pytest.fixture(scope="session", autouse=True)
def require_slurm():
    if not slurm_answers():
        if os.environ.get("CI"):
            pytest.fail("no Slurm cluster answers: .ci/run starts one with `bash .ci/slurm.sh up`")
        pytest.skip("no Slurm cluster answers (start one as root: bash .ci/slurm.sh install && bash .ci/slurm.sh up)")


@pytest.fixture
def slurm_profile(tmp_path: Path) -> Path:
    profile = tmp_path / "slurm-ci"
    profile.mkdir()
    config = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    config.update(
        {
            "slurm-init-seconds-before-status-checks": 1,
            "latency-wait": 5,
            "default-resources": {"slurm_partition": "debug", "runtime": 10, "mem_mb": 512},
        }
    )
    (profile / "config.yaml").write_text(yaml.safe_dump(config))
    site = yaml.safe_load((REPO / "profiles/slurm/site.yaml").read_text())["site"]
    site.update(
        {
            "name": "slurm-ci",
            "runtime": "none",
            "isolate_gpus": False,
            "tmp_root": None,
            "min_tmp_free_gb": 1,
            "hf_home": None,
            "hf_cache_mode": "none",
            "solve_overhead_minutes": 2,
            "evaluate_runtime_minutes": 10,
            "solve_resources": {"mem_mb": 1024, "disk_mb": 0, "cpus": 1},
            "evaluate_resources": {"mem_mb": 1024, "disk_mb": 0, "cpus": 1},
        }
    )
    (profile / "site.yaml").write_text(yaml.safe_dump({"site": site}))
    return profile


def probe_job_id() -> int:
    """The id of a new, trivial job: jobs submitted between two probes have ids between
    them (squeue forgets finished jobs after MinJobAge, so it cannot count them)."""
    out = subprocess.run(
        ["sbatch", "--parsable", "-p", "debug", "-o", "/dev/null", "--wrap", "true"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().split(";")[0])


def test_demo_campaign_through_slurm(tmp_path, slurm_profile):
    """The demo (tiny model, noop and demo_sft, real scorer) with every job submitted to Slurm.

    With a third of the demo's agent time: that the fine-tuning beats the baseline is
    tests/workflow/test_demo.py's claim, on the same agents and scorer; here the jobs, their
    records and the rerun are checked, and the CPU time goes to the other tests."""
    workdir = tmp_path / "campaign"
    (workdir / "config").mkdir(parents=True)
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["paths"] = {"agents_dir": str(REPO / "agents"), "tasks_dir": str(REPO / "tasks")}
    config["hours"] = [0.015]  # 54 s: demo_sft trains until it has learned (~20 s idle) and saves a model
    (workdir / "config/config.yaml").write_text(yaml.safe_dump(config))

    before = probe_job_id()
    plan = snakemake(workdir, "-n", profile_dir=slurm_profile, timeout=120)
    assert plan.returncode == 0, plan.stderr
    before_run = probe_job_id()
    assert before_run == before + 1, "a dry run must submit nothing"

    run = snakemake(workdir, profile_dir=slurm_profile, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    after = probe_job_id()
    hours = config["hours"][0]
    cells = {a: workdir / f"results/cells/{a}/arith/tiny-arith/{hours}h-0gpu-run1" for a in ("noop", "demo_sft")}
    scores = {}
    for agent, cdir in cells.items():
        solve = json.loads((cdir / "solve.json").read_text())
        job = int(solve["scheduler"]["SLURM_JOB_ID"])
        assert before_run < job < after, f"{agent}'s solve ran as Slurm job {job}"
        assert solve["scheduler"]["SLURM_JOB_PARTITION"] == "debug"
        scores[agent] = json.loads((cdir / "metrics.json").read_text())["accuracy"]
        assert 0.0 <= scores[agent] <= 1.0
    assert json.loads((cells["demo_sft"] / "solve.json").read_text())["final_model_files"] > 0
    assert scores["noop"] <= 0.05, "the random base model should not add numbers"
    # tiny model, 2 solves, 2 evaluates: 5 Slurm jobs (parse_trace and collect run locally)
    assert after - before_run - 1 == 5

    # delete one cell's metrics.json: exactly one new Slurm job, that cell's evaluate
    solve_mtime = (cells["noop"] / "solve.json").stat().st_mtime_ns
    (cells["noop"] / "metrics.json").unlink()
    rerun = snakemake(workdir, profile_dir=slurm_profile, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert probe_job_id() == after + 2, "exactly one job (the evaluate) between the probes"
    assert (cells["noop"] / "metrics.json").exists()
    assert (cells["noop"] / "solve.json").stat().st_mtime_ns == solve_mtime


def test_scorer_without_metrics_fails_the_slurm_run(workdir, slurm_profile):
    write_config(workdir, campaign_config(tasks=["fake", "broken"]))
    run = snakemake(workdir, profile_dir=slurm_profile, timeout=600)
    assert run.returncode != 0
    assert (cell_dir(workdir, "exit0") / "metrics.json").exists()
    broken = cell_dir(workdir, "exit0", task="broken")
    assert not (broken / "metrics.json").exists()
    assert json.loads((broken / "evaluate.json").read_text())["status"] == "failed"
    assert (broken / "solve.json").exists(), "the failed evaluate must not remove the solve's record"


def test_replacing_harness_files_mid_solve_changes_nothing(tmp_path, slurm_profile):
    """Seed item 5: while a Slurm-run cell is mid-solve, the checkout's Snakefile, scripts,
    package and the agent's solve.sh are replaced (mv over) or overwritten with versions
    that would fail; the cell finishes with the code it started with."""
    from ptb_harness.runtime.snapshot import harness_digest

    checkout = tmp_path / "checkout"
    for rel in ("Snakefile", "workflow", "src", "config"):
        src = REPO / rel
        if src.is_dir():
            shutil.copytree(src, checkout / rel, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, checkout / rel)
    started = tmp_path / "agent-started"
    workdir = tmp_path / "campaign"
    make_workdir(workdir)
    write_agent(
        workdir,
        "slow",
        f"touch {started}\nsleep 15\nmkdir -p final_model && echo '{{\"score\": 0.9}}' > final_model/config.json\n",
    )
    write_config(workdir, campaign_config(agents=["slow"], hours=[0.01]))
    # the digest covers the code and the campaign's agents/ and tasks/ as they are now
    original = harness_digest(checkout, workdir)
    env = {**os.environ, "CONDOR_CONFIG": os.devnull, "PYTHONPATH": str(checkout / "src")}
    cmd = [sys.executable, "-m", "ptb_harness", "run", "--workdir", str(workdir), "--profile", str(slurm_profile)]
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 180
        while not started.exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert started.exists(), "the agent never started"
        broken = "raise SystemExit('replaced harness file ran')\n"
        for rel in ("Snakefile", "workflow/rules/evaluate.smk", "src/ptb_harness/stages/evaluate.py"):
            new = checkout / f"{rel}.new"
            new.write_text(broken)
            new.replace(checkout / rel)  # mv over
        for rel in ("workflow/scripts/solve.py", "workflow/scripts/evaluate.py", "src/ptb_harness/stages/solve.py"):
            (checkout / rel).write_text(broken)  # overwritten in place
        agent_sh = workdir / "agents/slow/solve.sh"
        (agent_sh.with_suffix(".new")).write_text("exit 42\n")
        agent_sh.with_suffix(".new").replace(agent_sh)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    cdir = cell_dir(workdir, "slow", hours="0.01")
    solve = json.loads((cdir / "solve.json").read_text())
    assert solve["exit_code"] == 0 and solve["final_model_files"] == 1
    assert solve["harness"]["digest"] == original, "the cell ran the harness it started with"
    assert solve["harness"]["snapshot"] and "SLURM_JOB_ID" in solve["scheduler"]
    assert json.loads((cdir / "evaluate.json").read_text())["harness"]["digest"] == original
    assert json.loads((cdir / "metrics.json").read_text())["accuracy"] == 0.9
    assert harness_digest(checkout) != original
