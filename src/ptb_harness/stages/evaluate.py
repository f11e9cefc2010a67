"""The evaluate stage of one cell: the task's evaluate.py under a retry ladder.

Each attempt writes to a private temp file in the cell dir; the harness checks it (a
JSON object with a numeric ``accuracy`` in [0, 1]) and only then renames it to
metrics.json. So metrics.json is complete and valid or absent, whatever evaluate.py does
and whenever it is killed. Every attempt's log is kept under ``evaluate/<start>/``, and
``evaluate.json`` (not a Snakemake output, so it survives a failed job) says what each
attempt did.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ptb_harness.campaign.cells import Campaign, Cell
from ptb_harness.campaign.graders import endpoint_for, task_uses_grader
from ptb_harness.campaign.tasks import TaskSpec, load_task
from ptb_harness.core.errors import HarnessError
from ptb_harness.core.records import atomic_write_bytes, atomic_write_json, check_metrics, read_json_dict
from ptb_harness.gpu.cellset import GpuAssignment, job_gpu_set
from ptb_harness.gpu.monitor import GpuMonitor
from ptb_harness.gpu.nvml import load_nvml
from ptb_harness.gpu.reap import ReapHost, ReapPolicy, reap
from ptb_harness.graders.client import GRADER_ENV, grader_failure
from ptb_harness.runtime.hf_cache import hf_cache_view
from ptb_harness.runtime.procs import describe, iso_utc, run_budgeted, utc_stamp
from ptb_harness.runtime.sandbox import Bind, Sandbox
from ptb_harness.runtime.snapshot import provenance
from ptb_harness.stages.provenance import cell_provenance, scorer_versions, versions_command

log = logging.getLogger("ptb_harness.stages.evaluate")


def evaluate_argv(task: TaskSpec, model: Path, out: Path, max_tokens: int | None) -> list[str]:
    """evaluate.py's command line, run in (a copy of) the task dir inside the scorer sandbox."""
    argv = ["python", "evaluate.py", "--model-path", str(model), "--json-output-file", str(out)]
    argv += task.extra_args
    if max_tokens is not None:
        argv += [task.token_flag, str(max_tokens)]
    return argv


def run_evaluate(
    campaign: Campaign,
    cell: Cell,
    *,
    solve_json: Path,
    final_model: Path,
    metrics_json: Path,
    host_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Score the cell's final model. Raises HarnessError when no attempt gave valid metrics."""
    host_env = dict(os.environ if host_env is None else host_env)
    metrics_json = metrics_json.resolve()
    cell_dir = metrics_json.parent
    record_path = cell_dir / "evaluate.json"
    started = time.time()
    record: dict[str, Any] = {
        "cell": cell.wildcards,
        "started_at": iso_utc(started),
        "harness": provenance(),
        "attempts": [],
    }

    solve = read_json_dict(solve_json)
    if solve is None:
        raise HarnessError(f"{solve_json}: missing or not valid JSON; rerun the solve")
    if not solve.get("final_model_files"):
        record.update(status="no_model", reason=f"agent {solve.get('description', '?')} and left no final model")
        atomic_write_json(record_path, record)
        raise HarnessError(f"nothing to score: {record['reason']}")

    task = load_task(campaign.task_dir(cell.task))
    plan = task.attempt_plan()
    timeout_min = task.attempt_timeout_minutes or campaign.config["evaluate"]["attempt_timeout_minutes"]
    site = campaign.config["site"]
    tmp_root = Path(site["tmp_root"] or tempfile.gettempdir())
    # a graded task's scorer gets the grader endpoint (no secret) and its key variable by name
    grader_env, grader_keys = {}, []
    if task_uses_grader(task.dir):
        endpoint = endpoint_for(campaign.config, "grader")
        grader_env = {GRADER_ENV: endpoint.to_env()}
        grader_keys = [endpoint.api_key_env] if endpoint.api_key_env else []
    attempts_dir = cell_dir / "evaluate" / utc_stamp(started).replace(":", "")
    attempts_dir.mkdir(parents=True, exist_ok=True)
    # The scorer runs in a scratch copy of the task: evaluate.py may write next to itself,
    # and a task file replaced in the checkout meanwhile cannot change a running attempt.
    stack = contextlib.ExitStack()
    work = Path(tempfile.mkdtemp(prefix=f"ptb-eval-{cell.slug}-", dir=tmp_root))
    sandbox = Sandbox(site, host_env)
    nvml = load_nvml()
    try:
        assignment = GpuAssignment(site.get("gpu_ids"), site.get("gpu_pool"), site.get("gpu_lock_dir"))
        gpu_set = stack.enter_context(job_gpu_set(cell.num_gpus, assignment, host_env, nvml))
        reap_policy = ReapPolicy(site["gpu_reap"], site["gpu_scope"], float(site["reap_wait_seconds"]))
        gpus = gpu_set.sandbox_ids()
        home, tmp = work / "home", work / "tmp"
        shutil.copytree(task.dir, home / "task", symlinks=False)
        tmp.mkdir()
        hf_view = stack.enter_context(hf_cache_view(site, work))
        for k, cap in enumerate(plan, 1):
            out = cell_dir / f".metrics.attempt-{k}.json"
            out.unlink(missing_ok=True)
            launch = sandbox.launch(
                role="scorer",
                command=evaluate_argv(task, final_model.resolve(), out, cap),
                job_home=home,
                job_tmp=tmp,
                workdir="task",
                env=grader_env,
                pass_names=[*task.required_api_keys, *grader_keys],
                gpus=gpus,
                # the cell dir at its own absolute path, so metrics.json lands where collect reads it
                binds=[Bind(cell_dir, str(cell_dir))],
                hf_home_host=hf_view[0],
                hf_read_only=hf_view[1],
            )
            attempt_log = attempts_dir / f"attempt-{k}.log"
            if cell.num_gpus:
                # only processes on this job's GPUs, and in `own` mode only ours: other users' jobs share the node
                report = reap(gpu_set, reap_policy, host=ReapHost(nvml=nvml))
                log.info(
                    "GPU reap before attempt %d (%s): %s",
                    k,
                    report.mode,
                    report.note or f"{len(report.killed)} killed, {len(report.survivors)} still there",
                )
            log.info("attempt %d/%d (max_tokens=%s)", k, len(plan), cap)
            with GpuMonitor.for_cell(nvml, gpu_set.gpus, cell_dir, "evaluate", site):
                result = run_budgeted(
                    launch.argv,
                    env=launch.env,
                    cwd=launch.cwd,
                    output=attempt_log,
                    budget_s=timeout_min * 60,
                    kill_grace_s=30,
                    output_mode=0o644,
                )
            data = out.read_bytes() if out.is_file() else None
            out.unlink(missing_ok=True)
            metrics, why = check_metrics(data) if data is not None else (None, "wrote no metrics file")
            if metrics is None:
                why = grader_failure(attempt_log) or why
            entry = {
                "attempt": k,
                "max_tokens": cap,
                "process": describe(result),
                "exit_code": result.exit_code,
                "duration_s": round(result.duration_s, 3),
                "log": str(attempt_log.relative_to(cell_dir)),
                "ok": metrics is not None,
                "problem": why or None,
            }
            record["attempts"].append(entry)
            if metrics is not None:
                atomic_write_bytes(metrics_json, data)
                record.update(status="scored", accuracy=metrics["accuracy"], ended_at=iso_utc(time.time()))
                atomic_write_json(record_path, record)
                log.info("attempt %d scored accuracy=%s", k, metrics["accuracy"])
                return record
            log.warning("attempt %d failed: evaluate.py %s, %s", k, entry["process"], why)
            atomic_write_json(record_path, {**record, "status": "running"})
    finally:
        if record["attempts"]:  # the scorer ran: record what ran it, scored or not
            _write_provenance(campaign, cell, solve, sandbox, work, gpu_set, nvml, cell_dir)
        stack.close()
        shutil.rmtree(work, ignore_errors=True)
    last = record["attempts"][-1]
    record.update(
        status="failed",
        reason=f"no valid metrics after {len(plan)} attempts; last: evaluate.py {last['process']}, {last['problem']}",
        ended_at=iso_utc(time.time()),
    )
    atomic_write_json(record_path, record)
    raise HarnessError(record["reason"])


def _scorer_versions(sandbox: Sandbox, work: Path, gpus: list[str]) -> dict:
    """The scorer's package versions, asked inside its own sandbox. Not in the background
    beside the attempts: the attempts' clean-up stops every child process of the stage."""
    launch = sandbox.launch(
        role="scorer",
        command=versions_command(),
        job_home=work / "home",
        job_tmp=work / "tmp",
        workdir="task",
        env={},
        pass_names=(),
        gpus=gpus,
        binds=[],
        hf_home_host=None,
        hf_read_only=True,
    )
    return scorer_versions(launch.argv, launch.env, launch.cwd)


def _write_provenance(
    campaign: Campaign, cell: Cell, solve: dict, sandbox: Sandbox, work: Path, gpu_set: Any, nvml: Any, cell_dir: Path
) -> None:
    """provenance.json. A record, never a reason to fail the stage."""
    try:
        packages = _scorer_versions(sandbox, work, gpu_set.sandbox_ids())
        atomic_write_json(
            cell_dir / "provenance.json",
            cell_provenance(campaign, cell, solve=solve, gpus=gpu_set.gpus, nvml=nvml, scorer_packages=packages),
        )
    except Exception as e:
        log.warning("provenance.json not written: %s: %s", type(e).__name__, e)
