"""The pipeline end to end with the real Snakemake, on fast fake agents and scorers."""

from __future__ import annotations

import csv
import json
import re
import signal
import subprocess
import sys

import pytest
from conftest import REPO, campaign_config, cell_dir, snakemake, write_config

from ptb_harness.core.cell_files import lock_file, stage_benchmark, state_file
from ptb_harness.core.layout import COLLECT_OUTPUTS
from ptb_harness.results.stage_benchmarks import read_benchmark

STAGE_HOURS = f"results/{COLLECT_OUTPUTS['stage_hours']}"

pytestmark = pytest.mark.slow


def collect_tables(workdir) -> subprocess.CompletedProcess:
    """`ptb-harness collect`: the tables from whatever exists."""
    cmd = [sys.executable, "-m", "ptb_harness", "collect", "--workdir", str(workdir)]
    return subprocess.run([*cmd, "--profile", str(REPO / "profiles/local")], capture_output=True, text=True)


def planned_jobs(stdout: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run: rule -> count."""
    jobs = {}
    in_table = False
    for line in stdout.splitlines():
        if line.startswith("job ") and "count" in line:
            in_table = True
            continue
        if in_table:
            m = re.match(r"^(\S+)\s+(\d+)$", line.strip())
            if m and m.group(1) != "total":
                jobs[m.group(1)] = int(m.group(2))
            elif line.strip().startswith("total"):
                break
    return jobs


def test_dry_run_lists_every_job_and_a_finished_campaign_does_nothing(workdir):
    write_config(
        workdir, campaign_config(models=[{"name": "m1", "path": "models/m1"}, {"name": "m2", "path": "models/m2"}])
    )
    plan = snakemake(workdir, "-n")
    assert plan.returncode == 0, plan.stderr
    assert planned_jobs(plan.stdout) == {"solve": 2, "parse_trace": 2, "evaluate": 2, "collect": 1, "all": 1}
    assert not (workdir / "results").exists(), "a dry run must not write results"

    run = snakemake(workdir)
    assert run.returncode == 0, run.stderr
    for model in ("m1", "m2"):
        d = cell_dir(workdir, "exit0", model=model)
        assert json.loads((d / "metrics.json").read_text())["accuracy"] == 0.75
        assert (d / "solve_parsed.txt").read_text() == (d / "solve_out.txt").read_text()
    tables = workdir / "results" / "tables"
    assert (tables / "cells.csv").read_text().count("\n") == 3  # header + 2 cells
    assert "| exit0 | 0.750 (2/2) |" in (tables / "leaderboard.md").read_text()

    again = snakemake(workdir)
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr


def test_deleting_one_metrics_json_reruns_exactly_that_evaluate(workdir):
    write_config(workdir, campaign_config(agents=["exit0", "selfkill"]))
    assert snakemake(workdir).returncode == 0
    victim = cell_dir(workdir, "exit0")
    other = cell_dir(workdir, "selfkill")
    solve_before = (victim / "solve.json").stat().st_mtime_ns
    other_metrics = (other / "metrics.json").stat().st_mtime_ns
    (victim / "metrics.json").unlink()

    plan = snakemake(workdir, "-n")
    assert planned_jobs(plan.stdout) == {"evaluate": 1, "collect": 1, "all": 1}
    assert str(victim / "metrics.json") in plan.stdout or "exit0/fake/m1" in plan.stdout

    run = snakemake(workdir)
    assert run.returncode == 0, run.stderr
    assert (victim / "metrics.json").exists()
    assert (victim / "solve.json").stat().st_mtime_ns == solve_before, "solve must not rerun"
    assert (other / "metrics.json").stat().st_mtime_ns == other_metrics


def test_a_scorer_that_never_writes_metrics_fails_the_run_after_the_whole_ladder(workdir):
    write_config(workdir, campaign_config(tasks=["fake", "broken"]))
    run = snakemake(workdir)
    assert run.returncode != 0, "a cell without metrics.json must fail the campaign run"

    broken = cell_dir(workdir, "exit0", task="broken")
    assert not (broken / "metrics.json").exists()
    record = json.loads((broken / "evaluate.json").read_text())
    assert record["status"] == "failed"
    assert [a["max_tokens"] for a in record["attempts"]] == [None, None, 100, 50]
    for attempt in record["attempts"]:
        log = (broken / attempt["log"]).read_text()
        cap = attempt["max_tokens"]
        assert ("--max-tokens" in log) == (cap is not None)
        if cap is not None:
            assert f"--max-tokens {cap}" in log
        assert "scorer crashed" in log
    # the solve's outputs are intact, and the good cell was scored anyway (keep-going)
    solve = json.loads((broken / "solve.json").read_text())
    assert solve["status"] == "exited" and solve["final_model_files"] == 1
    assert (broken / "final_model" / "config.json").exists()
    assert (broken / "solve_out.txt").exists()
    assert (cell_dir(workdir, "exit0") / "metrics.json").exists()
    # and the rerun plans only the failed evaluate, never the solve
    plan = snakemake(workdir, "-n")
    assert planned_jobs(plan.stdout) == {"evaluate": 1, "collect": 1, "all": 1}


def test_solve_json_records_what_the_agent_did(workdir):
    write_config(workdir, campaign_config(agents=["exit0", "exit3", "selfkill", "overrun"]))
    run = snakemake(workdir)
    # exit3 leaves no model: its evaluate fails, so the run does too
    assert run.returncode != 0

    def solve(agent):
        return json.loads((cell_dir(workdir, agent) / "solve.json").read_text())

    assert solve("exit0")["status"] == "exited" and solve("exit0")["exit_code"] == 0
    assert solve("exit3")["status"] == "exited" and solve("exit3")["exit_code"] == 3
    assert solve("exit3")["final_model_files"] == 0
    assert solve("selfkill")["status"] == "signal" and solve("selfkill")["signal"] == signal.SIGKILL
    overrun = solve("overrun")
    assert overrun["status"] == "timeout" and overrun["exit_code"] is None
    assert overrun["signal"] == signal.SIGKILL, "TERM was ignored, so KILL must have ended it"
    assert 1.8 <= overrun["duration_s"] < 1.8 + 1 + 5  # budget 1.8 s + 1 s grace + slack
    trace = (cell_dir(workdir, "overrun") / "solve_out.txt").read_text()
    assert re.search(r"^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\] TERM ignored$", trace, re.M)
    # the tables can be written at any time from what exists; unscored cells are named
    res = collect_tables(workdir)
    assert res.returncode == 0, res.stderr
    cells = (workdir / "results" / "tables" / "cells.csv").read_text()
    assert re.search(r"^exit3,fake,m1,0.0005,0,1,agent_failed,agent exited with code 3; no final model,,", cells, re.M)
    assert re.search(r"^exit0,fake,m1,0.0005,0,1,scored,accuracy 0.75,0.75,", cells, re.M)
    # every rule's job ran in the job wrapper: parse_trace too has its state record and lock
    for agent in ("exit0", "exit3"):
        d = cell_dir(workdir, agent)
        state = json.loads((d / state_file("parse_trace")).read_text())
        assert state["state"] == "done" and state["pid"] and (d / lock_file("parse_trace")).exists()
    # where the hours went: each benchmarked job's wall, CPU and RSS; a failed job writes
    # none (exit3's evaluate), so its cell shows unmeasured in its own row
    assert "solve" in res.stdout and "hours per stage: " in res.stdout
    rows = {(r["stage"], r["outcome"]): r for r in csv.DictReader((workdir / STAGE_HOURS).open())}
    assert [k for k in rows if k[0] == "solve"][-1] == ("solve", "all")
    assert rows["solve", "all"]["cells"] == "4" and rows["solve", "all"]["measured"] == "4"
    assert float(rows["solve", "all"]["wall_h"]) * 3600 > 1.8  # overrun ran its 1.8 s budget
    assert rows["evaluate", "agent_failed"]["measured"] == "0" and rows["evaluate", "agent_failed"]["wall_h"] == ""
    assert not any(stage == "judge" for stage, _ in rows)  # the judge is off
    bench = read_benchmark(cell_dir(workdir, "exit0") / stage_benchmark("evaluate"))
    assert bench is not None and bench["wall_s"] > 0


def test_a_gpu_cell_on_a_machine_without_gpus_is_an_infrastructure_failure(workdir):
    write_config(workdir, campaign_config(agents=["exit0"], num_gpus=[0, 1]))
    run = snakemake(workdir)
    assert run.returncode != 0
    cpu = workdir / "results/cells/exit0/fake/m1/0.0005h-0gpu-run1"
    gpu = workdir / "results/cells/exit0/fake/m1/0.0005h-1gpu-run1"
    assert (cpu / "metrics.json").exists(), "the CPU cell is not blocked by the GPU cell"
    preflight = json.loads((gpu / "preflight.json").read_text())
    assert preflight["status"] == "failed" and preflight["reason"] == "no NVIDIA driver on this machine"
    assert not (gpu / "solve.json").exists() and not (gpu / "solve_out.txt").exists(), "the agent must not start"
    log = (gpu / "logs" / "solve.log").read_text()
    assert "CUDA preflight failed, agent not started: no NVIDIA driver on this machine" in log
    assert "Traceback" not in log
    res = collect_tables(workdir)
    assert res.returncode == 0, res.stderr
    rows = {r["num_gpus"]: r for r in csv.DictReader((workdir / "results/tables/cells.csv").open())}
    assert rows["0"]["outcome"] == "scored"
    assert rows["1"]["outcome"] == "infra_failed"
    assert rows["1"]["evidence"] == "CUDA preflight failed, agent not started: no NVIDIA driver on this machine"
