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
import hashlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptb_harness.campaign.cells import Campaign, Cell
from ptb_harness.campaign.graders import task_uses_grader
from ptb_harness.campaign.scoring import base_architecture
from ptb_harness.campaign.tasks import TaskSpec
from ptb_harness.core.cell_files import EVALUATE, PROVENANCE
from ptb_harness.core.errors import HarnessError
from ptb_harness.core.records import (
    MAX_METRICS_BYTES,
    atomic_write_bytes,
    atomic_write_json,
    check_metrics,
    file_sha256,
    read_json_dict,
    read_record_bytes,
    tree_sha256,
)
from ptb_harness.gpu.cellset import GpuSet, job_gpu_set
from ptb_harness.gpu.monitor import GpuMonitor
from ptb_harness.gpu.nvml import load_nvml
from ptb_harness.gpu.reap import ReapHost, ReapPolicy, reap
from ptb_harness.runtime.hf_cache import hf_cache_view
from ptb_harness.runtime.procs import describe, iso_utc, utc_stamp
from ptb_harness.runtime.sandbox import Bind, LaunchRequest, Sandbox
from ptb_harness.runtime.snapshot import provenance
from ptb_harness.stages.provenance import cell_provenance, scorer_versions, versions_command
from ptb_scorer.protocol import GRADER_ENV, MODEL_INVALID_MARK, read_attempt_log

log = logging.getLogger("ptb_harness.stages.evaluate")


def evaluate_argv(
    task: TaskSpec, model: Path, out: Path, max_tokens: int | None, base_architecture: str | None = None
) -> list[str]:
    """evaluate.py's command line, run in (a copy of) the task dir inside the scorer sandbox."""
    argv = ["python", "evaluate.py", "--model-path", str(model), "--json-output-file", str(out)]
    argv += task.extra_args
    if base_architecture is not None:
        argv += ["--base-architecture", base_architecture]
    if max_tokens is not None:
        argv += [task.token_flag, str(max_tokens)]
    return argv


def base_architecture_for(campaign: Campaign, cell: Cell, task: TaskSpec) -> str | None:
    """The base model's architecture for ``--base-architecture``; a HarnessError when the
    task needs it and it is unknown (the campaign check could not read it at plan time)."""
    if not task.pass_base_architecture:
        return None
    arch = base_architecture(campaign, cell.model)
    if arch is None:
        raise HarnessError(
            f"base model {campaign.model_source(cell.model)}: no readable config.json (local dir or site.hf_home);"
            " run `ptb-harness prefetch`"
        )
    return arch


@dataclass(frozen=True)
class Ladder:
    """What every attempt of one evaluate run shares; ``attempt(k, cap)`` is one step of the ladder."""

    cell: Cell
    task: TaskSpec
    cell_dir: Path
    model: Path
    attempts_dir: Path
    sandbox: Sandbox
    work: Path
    gpu_set: GpuSet
    nvml: Any
    hf_view: tuple[Path | None, bool]
    reap_policy: ReapPolicy
    monitor_interval_s: float
    timeout_s: float
    #: a graded task's scorer gets the grader endpoint (no secret) and its key variable by name
    grader_env: Mapping[str, str]
    pass_names: Sequence[str]
    steps: int
    #: the base model's architecture, for tasks that check the final model's against it
    base_architecture: str | None = None
    #: sha256 of the evaluate.py that runs (the scratch copy, links followed)
    evaluate_sha256: str | None = None

    def _request(self, out: Path, cap: int | None) -> LaunchRequest:
        return LaunchRequest(
            role="scorer",
            command=evaluate_argv(self.task, self.model, out, cap, self.base_architecture),
            job_home=self.work / "home",
            job_tmp=self.work / "tmp",
            workdir="task",
            # scoring reads only the prefetched cache: a compute node may have no internet
            env={**self.grader_env, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
            pass_names=self.pass_names,
            gpus=self.gpu_set.sandbox_ids(),
            # final_model at its own absolute path, read-only, wherever the results are; the
            # cell dir (solve.json, the other records) is out of the scorer's sight
            binds=[Bind(self.model, str(self.model), read_only=True)],
            hf_home_host=self.hf_view[0],
            hf_read_only=self.hf_view[1],
        )

    def _reap(self, k: int) -> None:
        """Only processes on this job's GPUs, and in `own` mode only ours: other users'
        jobs share the node."""
        report = reap(self.gpu_set, self.reap_policy, host=ReapHost(nvml=self.nvml))
        log.info(
            "GPU reap before attempt %d (%s): %s",
            k,
            report.mode,
            report.note or f"{len(report.killed)} killed, {len(report.survivors)} still there",
        )

    def attempt(self, k: int, cap: int | None) -> tuple[dict[str, Any], bytes | None, dict[str, Any] | None]:
        """One run of evaluate.py: (its entry in evaluate.json, the metrics file's bytes
        and the metrics when they are valid)."""
        # the scorer writes its result into its own scratch TMPDIR, the harness reads it there
        out = self.work / "tmp" / f"metrics.attempt-{k}.json"
        out.unlink(missing_ok=True)
        inside = self.sandbox.view(self.work / "home", self.work / "tmp", self.hf_view[0]).tmp
        launch = self.sandbox.launch(self._request(Path(inside) / out.name, cap))
        attempt_log = self.attempts_dir / f"attempt-{k}.log"
        if self.cell.num_gpus:
            self._reap(k)
        log.info("attempt %d/%d (max_tokens=%s)", k, self.steps, cap)
        monitor = GpuMonitor.for_cell(self.nvml, self.gpu_set.gpus, self.cell_dir, "evaluate", self.monitor_interval_s)
        with monitor:
            result = launch.run(attempt_log, budget_s=self.timeout_s, kill_grace_s=30, output_mode=0o644)
        data, why = read_record_bytes(out, MAX_METRICS_BYTES)  # no link followed, size bounded
        out.unlink(missing_ok=True)
        metrics, why = check_metrics(data) if data is not None else (None, why or "wrote no metrics file")
        # the scorer's own account of the attempt (ptb_scorer.protocol): what it ran with,
        # and why the model (not the machine) cannot be scored, which stops the ladder
        report = read_attempt_log(attempt_log)
        scorer, invalid = report.scorer_info, report.model_invalid
        if metrics is None:
            why = report.grader_failed or why
        if metrics is None and invalid is not None:
            why = f"{MODEL_INVALID_MARK} {invalid}"
        entry = {
            "attempt": k,
            "max_tokens": cap,
            "evaluate_py_sha256": self.evaluate_sha256,
            "scorer": scorer,
            "model_invalid": metrics is None and invalid is not None,
            "process": describe(result),
            "exit_code": result.exit_code,
            "duration_s": round(result.duration_s, 3),
            "log": str(attempt_log.relative_to(self.cell_dir)),
            "ok": metrics is not None,
            "problem": why or None,
        }
        return entry, data, metrics


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
    record_path = cell_dir / EVALUATE
    started = time.time()
    record: dict[str, Any] = {
        "cell": cell.wildcards,
        "started_at": iso_utc(started),
        "harness": provenance(),
        "attempts": [],
    }
    solve = _solved(solve_json, record, record_path)
    task = campaign.task(cell.task)
    base_arch = base_architecture_for(campaign, cell, task)
    plan = task.attempt_plan()
    site = campaign.settings.site
    attempts_dir = cell_dir / "evaluate" / utc_stamp(started).replace(":", "")
    attempts_dir.mkdir(parents=True, exist_ok=True)
    # The scorer runs in a scratch copy of the task: evaluate.py may write next to itself,
    # and a task file replaced in the checkout meanwhile cannot change a running attempt.
    stack = contextlib.ExitStack()
    work = Path(tempfile.mkdtemp(prefix=f"ptb-eval-{cell.slug}-", dir=site.tmp_root))
    sandbox = Sandbox(site.runtime, host_env)
    nvml = load_nvml()
    try:
        gpu_set = stack.enter_context(job_gpu_set(cell.num_gpus, site.gpu.assignment, host_env, nvml))
        shutil.copytree(task.dir, work / "home" / "task", symlinks=False)  # links followed (ptb_scorer)
        # what ran: the scorer and the whole task dir, as copied (a scorer patched in
        # the checkout shows here, and in the snapshot's digest under `ptb-harness run`)
        record["scorer"] = {
            "task_dir": str(task.dir),
            "evaluate_py_sha256": file_sha256(work / "home" / "task" / "evaluate.py"),
            "task_dir_sha256": tree_sha256(work / "home" / "task"),
        }
        (work / "tmp").mkdir()
        grader_env, grader_keys = _grader(campaign, task)
        ladder = Ladder(
            cell=cell,
            task=task,
            cell_dir=cell_dir,
            model=final_model.resolve(),
            attempts_dir=attempts_dir,
            sandbox=sandbox,
            work=work,
            gpu_set=gpu_set,
            nvml=nvml,
            hf_view=stack.enter_context(hf_cache_view(site.hf_cache, work)),
            reap_policy=site.gpu.reap,
            monitor_interval_s=site.gpu.monitor_interval_seconds,
            timeout_s=(task.attempt_timeout_minutes or campaign.settings.evaluate.attempt_timeout_minutes) * 60,
            grader_env=grader_env,
            pass_names=[*task.required_api_keys, *grader_keys],
            steps=len(plan),
            base_architecture=base_arch,
            evaluate_sha256=hashlib.sha256((work / "home" / "task" / "evaluate.py").read_bytes()).hexdigest(),
        )
        for k, cap in enumerate(plan, 1):
            entry, data, metrics = ladder.attempt(k, cap)
            record["attempts"].append(entry)
            if metrics is not None:
                # evaluate.json first: it vouches for metrics.json by its hash, so a
                # metrics.json nobody vouches for (forged, edited) is never scored, and a
                # kill between the two writes leaves no metrics.json (the cell reruns)
                digest = hashlib.sha256(data).hexdigest()
                record.update(
                    status="scored", accuracy=metrics["accuracy"], metrics_sha256=digest, ended_at=iso_utc(time.time())
                )
                atomic_write_json(record_path, record)
                atomic_write_bytes(metrics_json, data)
                log.info("attempt %d scored accuracy=%s", k, metrics["accuracy"])
                return record
            log.warning("attempt %d failed: evaluate.py %s, %s", k, entry["process"], entry["problem"])
            if entry["model_invalid"]:
                log.warning("attempt %d: the model cannot be scored; no further attempts", k)
                break
            atomic_write_json(record_path, {**record, "status": "running"})
    finally:
        if record["attempts"]:  # the scorer ran: record what ran it, scored or not
            _write_provenance(campaign, cell, solve, sandbox, work, gpu_set, nvml, cell_dir)
        stack.close()
        shutil.rmtree(work, ignore_errors=True)
    last = record["attempts"][-1]
    record.update(
        status="failed",
        reason=f"no valid metrics after {len(record['attempts'])} attempts"
        + ("" if len(record["attempts"]) == len(plan) else f" of {len(plan)}")
        + f"; last: evaluate.py {last['process']}, {last['problem']}",
        ended_at=iso_utc(time.time()),
    )
    atomic_write_json(record_path, record)
    raise HarnessError(record["reason"])


def _solved(solve_json: Path, record: dict[str, Any], record_path: Path) -> dict[str, Any]:
    """The solve record, when it names a final model to score; else the stage ends here."""
    solve = read_json_dict(solve_json)
    if solve is None:
        raise HarnessError(f"{solve_json}: missing or not valid JSON; rerun the solve")
    if not solve.get("final_model_files"):
        why = solve.get("agent_problem") or "left no final model"
        record.update(status="no_model", reason=f"agent {solve.get('description', '?')} and {why}")
        atomic_write_json(record_path, record)
        raise HarnessError(f"nothing to score: {record['reason']}")
    return solve


def _grader(campaign: Campaign, task: TaskSpec) -> tuple[dict[str, str], list[str]]:
    """A graded task's scorer gets the grader endpoint (no secret) and its key variable by name."""
    if not task_uses_grader(task.dir):
        return {}, []
    endpoint = campaign.settings.grader
    return {GRADER_ENV: endpoint.to_env()}, [endpoint.api_key_env] if endpoint.api_key_env else []


def _scorer_versions(sandbox: Sandbox, work: Path, gpus: list[str]) -> dict:
    """The scorer's package versions, asked inside its own sandbox. Not in the background
    beside the attempts: the attempts' clean-up stops every child process of the stage."""
    request = LaunchRequest(
        role="scorer",
        command=versions_command(),
        job_home=work / "home",
        job_tmp=work / "tmp",
        workdir="task",
        env={},
        gpus=gpus,
        hf_read_only=True,
    )
    launch = sandbox.launch(request)
    return scorer_versions(launch.argv, launch.env, launch.cwd)


def _write_provenance(
    campaign: Campaign, cell: Cell, solve: dict, sandbox: Sandbox, work: Path, gpu_set: Any, nvml: Any, cell_dir: Path
) -> None:
    """provenance.json. A record, never a reason to fail the stage."""
    try:
        packages = _scorer_versions(sandbox, work, gpu_set.sandbox_ids())
        atomic_write_json(
            cell_dir / PROVENANCE,
            cell_provenance(campaign, cell, solve=solve, gpus=gpu_set.gpus, nvml=nvml, scorer_packages=packages),
        )
    except Exception as e:
        log.warning("%s not written: %s: %s", PROVENANCE, type(e).__name__, e)
