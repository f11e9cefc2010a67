"""The workflow through a real Slurm cluster (.ci/slurm.sh starts one on localhost).

The profile is profiles/slurm with the CI's partition and small limits, and the `none`
runtime (no apptainer on CI machines) (.ci/slurm.sh): profiles/slurm with the CI's
partition and small limits, and the `none` runtime (no apptainer on CI machines)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO, campaign_config, cell_dir, snakemake, write_config

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
    """The demo (tiny model, noop and demo_sft, real scorer) with every job submitted to Slurm."""
    workdir = tmp_path / "campaign"
    (workdir / "config").mkdir(parents=True)
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["paths"] = {"agents_dir": str(REPO / "agents"), "tasks_dir": str(REPO / "tasks")}
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
    assert scores["demo_sft"] > scores["noop"] + 0.3, scores
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
