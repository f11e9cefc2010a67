"""The evaluate stage of one cell: the task's evaluate.py under a retry ladder.

Each attempt writes to a private temp file in the cell dir; the harness checks it (a
JSON object with a numeric ``accuracy`` in [0, 1]) and only then renames it to
metrics.json. So metrics.json is complete and valid or absent, whatever evaluate.py does
and whenever it is killed. Every attempt's log is kept under ``evaluate/<start>/``, and
``evaluate.json`` (not a Snakemake output, so it survives a failed job) says what each
attempt did.

The steps: the scorer job (``stages.scorer_job``: where the scorer runs), the attempt
plan (the task's ladder, one ``Ladder.attempt`` per step), the record.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.tasks import TaskSpec
from ptb_harness.core.cell_files import EVALUATE, EVALUATE_LOGS, PROVENANCE, EvaluateAttempt, SolveRecord
from ptb_harness.core.cell_files import attempt_log as attempt_log_name
from ptb_harness.core.errors import HarnessError
from ptb_harness.core.records import (
    MAX_METRICS_BYTES,
    atomic_write_bytes,
    atomic_write_json,
    check_metrics,
    read_record_bytes,
)
from ptb_harness.gpu.monitor import GpuMonitor
from ptb_harness.gpu.reap import ReapHost, reap
from ptb_harness.runtime.procs import describe, iso_utc, utc_stamp
from ptb_harness.runtime.snapshot import provenance
from ptb_harness.stages.provenance import cell_provenance, scorer_versions, versions_command
from ptb_harness.stages.scorer_job import ScorerJob, base_architecture_for, scorer_job
from ptb_harness.stages.seed_plan import SeedAttempt, SeedPlan
from ptb_scorer.protocol import MODEL_INVALID_MARK, AttemptLog, read_attempt_log, seed_output
from ptb_scorer.seeds import combine, is_greedy, model_temperature, seeds_for

log = logging.getLogger("ptb_harness.stages.evaluate")


@dataclass(frozen=True)
class Ladder:
    """One evaluate run's attempts: ``attempt(k, cap)`` is step k of the plan, in ``job``
    (``attempt_seeds(k, step)`` with seeds)."""

    job: ScorerJob
    cell: Cell
    cell_dir: Path
    model: Path
    attempts_dir: Path
    steps: int

    def _reap(self, k: int) -> None:
        """Only processes on this job's GPUs, and in `own` mode only ours: other users'
        jobs share the node."""
        report = reap(self.job.gpu_set, self.job.reap_policy, host=ReapHost(nvml=self.job.nvml))
        log.info(
            "GPU reap before attempt %d (%s): %s",
            k,
            report.mode,
            report.note or f"{len(report.killed)} killed, {len(report.survivors)} still there",
        )

    def _run(self, k: int, cap: int | None, seeds: tuple[int, ...] = (), gated: bool = False) -> _Run:
        """evaluate.py once, in the scorer's sandbox; its metrics files are read after."""
        job = self.job
        # the scorer writes its results into its own scratch TMPDIR, the harness reads them there
        out = job.tmp / f"metrics.attempt-{k}.json"
        outputs = [seed_output(out, s) for s in seeds] if seeds else [out]
        for path in outputs:
            path.unlink(missing_ok=True)
        inside = job.sandbox.view(job.home, job.tmp, job.hf_view[0]).tmp
        launch = job.sandbox.launch(job.request(self.model, Path(inside) / out.name, cap, seeds, gated))
        attempt_log = self.attempts_dir / attempt_log_name(k)
        if self.cell.num_gpus:
            self._reap(k)
        log.info("attempt %d/%d (max_tokens=%s%s)", k, self.steps, cap, f", seeds {seeds}" if seeds else "")
        monitor = GpuMonitor.for_cell(job.nvml, job.gpu_set.gpus, self.cell_dir, "evaluate", job.monitor_interval_s)
        with monitor:
            # an attempt's limit is per seed: each seed is one of upstream's attempts
            budget_s = job.timeout_s * max(1, len(seeds))
            result = launch.run(attempt_log, budget_s=budget_s, kill_grace_s=30, output_mode=0o644)
        return _Run(k, cap, result, attempt_log, outputs, read_attempt_log(attempt_log))

    def _entry(self, run: _Run, ok: bool, why: str, invalid: str | None, **seeds: Any) -> dict[str, Any]:
        entry = EvaluateAttempt(
            attempt=run.k,
            max_tokens=run.cap,
            evaluate_py_sha256=self.job.evaluate_sha256,
            scorer=run.report.scorer_info,
            model_invalid=invalid is not None,
            process=describe(run.result),
            exit_code=run.result.exit_code,
            duration_s=round(run.result.duration_s, 3),
            log=str(run.attempt_log.relative_to(self.cell_dir)),
            ok=ok,
            problem=why or None,
            **seeds,
        )
        return entry.to_dict()

    def attempt(self, k: int, cap: int | None) -> tuple[dict[str, Any], bytes | None, dict[str, Any] | None]:
        """One run of evaluate.py: (its entry in evaluate.json, the metrics file's bytes
        and the metrics when they are valid)."""
        run = self._run(k, cap)
        data, metrics, why = _read_metrics(run.outputs[0])
        # the scorer's own account of the attempt (ptb_scorer.protocol): what it ran with,
        # and why the model (not the machine) cannot be scored, which stops the ladder
        invalid = run.report.model_invalid if metrics is None else None
        if metrics is None:
            why = f"{MODEL_INVALID_MARK} {invalid}" if invalid is not None else run.report.grader_failed or why
        return self._entry(run, metrics is not None, why, invalid), data, metrics

    def attempt_seeds(self, k: int, step: SeedAttempt) -> tuple[dict[str, Any], dict[int, dict], dict[int, str]]:
        """One run of evaluate.py with the step's seeds: (its entry in evaluate.json, each
        scored seed's metrics, why each other seed has none)."""
        run = self._run(k, step.cap, step.seeds, step.gated)
        scored, failed = {}, {}
        for seed, path in zip(step.seeds, run.outputs, strict=True):
            _, metrics, why = _read_metrics(path)
            if metrics is not None:
                scored[seed] = metrics
            else:
                failed[seed] = run.report.seed_failures.get(seed) or f"{why} (evaluate.py {describe(run.result)})"
        invalid = run.report.model_invalid if not scored else None
        why = f"{MODEL_INVALID_MARK} {invalid}" if invalid is not None else run.report.grader_failed or ""
        if not why and failed:
            why = f"{len(failed)} of {len(step.seeds)} seeds without metrics"
        seeds = {
            "seeds": step.seeds,
            "seeds_scored": tuple(scored),
            "seeds_failed": {str(s): w for s, w in failed.items()},
            "model_loads": run.report.model_loads,
        }
        return self._entry(run, bool(scored), why, invalid, **seeds), scored, failed


@dataclass(frozen=True)
class _Run:
    """One evaluate.py run: its process, its log (as read) and where its metrics go."""

    k: int
    cap: int | None
    result: Any
    attempt_log: Path
    outputs: list[Path]
    report: AttemptLog


def _read_metrics(path: Path) -> tuple[bytes | None, dict[str, Any] | None, str]:
    """A metrics file the scorer wrote (no link followed, size bounded), checked, then
    removed: (its bytes, the metrics when valid, why not)."""
    data, why = read_record_bytes(path, MAX_METRICS_BYTES)
    path.unlink(missing_ok=True)
    metrics, why = check_metrics(data) if data is not None else (None, why or "wrote no metrics file")
    return data, metrics, why


def run_evaluate(
    campaign: Campaign,
    cell: Cell,
    *,
    solve_json: Path,
    final_model: Path,
    metrics_json: Path,
    host_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Score the cell's final model: the scorer job, then the attempt plan, then the
    record. Raises HarnessError when no attempt gave valid metrics."""
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
    seeds = _seed_plan(task, campaign.settings.evaluate.seeds, final_model, record)
    attempts_dir = cell_dir / EVALUATE_LOGS / utc_stamp(started).replace(":", "")
    attempts_dir.mkdir(parents=True, exist_ok=True)
    with scorer_job(campaign, cell, task, host_env, base_arch) as job:
        record["scorer"] = job.identity()
        if job.chat_template is not None:  # what the harness handed the scorer
            record["chat_template"] = job.chat_template.record()
        ladder = Ladder(job, cell, cell_dir, final_model.resolve(), attempts_dir, steps=len(plan))
        try:
            scored = (
                _climb(ladder, plan, record, record_path, metrics_json)
                if seeds is None
                else _climb_seeds(ladder, seeds, record, record_path, metrics_json)
            )
            if scored:
                return record
        finally:
            if record["attempts"]:  # the scorer ran: record what ran it, scored or not
                _write_provenance(campaign, cell, solve, job, cell_dir)
    _record_failure(record, len(plan), record_path)
    raise HarnessError(record["reason"])


def _climb(ladder: Ladder, plan: list[int | None], record: dict, record_path: Path, metrics_json: Path) -> bool:
    """The attempts of the plan, in order, until one scores (True) or the model cannot
    be scored; evaluate.json says how far it got after every attempt."""
    for k, cap in enumerate(plan, 1):
        entry, data, metrics = ladder.attempt(k, cap)
        record["attempts"].append(entry)
        if metrics is not None and data is not None:
            _record_score(record, record_path, metrics_json, data, metrics)
            log.info("attempt %d scored accuracy=%s", k, metrics["accuracy"])
            return True
        log.warning("attempt %d failed: evaluate.py %s, %s", k, entry["process"], entry["problem"])
        if entry["model_invalid"]:
            log.warning("attempt %d: the model cannot be scored; no further attempts", k)
            return False
        atomic_write_json(record_path, {**record, "status": "running"})
    return False


def _seed_plan(task: TaskSpec, seeds: tuple[int, ...], final_model: Path, record: dict) -> SeedPlan | None:
    """The final evaluation's seeds for this cell (None: the task takes none): the task's
    policy over the campaign's seeds, greedy from the final model's own generation config
    (read bounded, no link followed; unreadable: not greedy, every seed)."""
    if task.seed_policy is None:
        return None
    temperature = model_temperature(final_model)
    chosen = seeds_for(task.seed_policy, seeds, is_greedy(temperature))
    record["seeds"] = {
        "policy": task.seed_policy,
        "campaign": list(seeds),
        "temperature": temperature,
        "greedy": is_greedy(temperature),
        "evaluated": list(chosen),
    }
    return SeedPlan(task.ladder_steps(), chosen)


def _climb_seeds(ladder: Ladder, plan: SeedPlan, record: dict, record_path: Path, metrics_json: Path) -> bool:
    """The seed plan's attempts (each runs every seed still to score, on one loaded model)
    until none is left or the model cannot be scored; then, if the first seed scored,
    metrics.json: the mean over the seeds that scored (True). evaluate.json says how far
    it got after every attempt."""
    k = 0
    while (step := plan.next()) is not None:
        k += 1
        entry, scored, failed = ladder.attempt_seeds(k, step)
        record["attempts"].append(entry)
        plan.record(k, step, scored, failed)
        record["seeds"]["outcomes"] = plan.summary()
        if failed:
            log.warning("attempt %d: seeds without metrics: %s", k, "; ".join(f"{s}: {w}" for s, w in failed.items()))
        if entry["model_invalid"]:
            log.warning("attempt %d: the model cannot be scored; no further attempts", k)
            return False
        atomic_write_json(record_path, {**record, "status": "running"})
    if not plan.first_scored:
        return False
    metrics = combine(plan.ordered_scores(), len(plan.seeds))
    data = (json.dumps(metrics, indent=2) + "\n").encode()  # per_seed in the seeds' order
    _record_score(record, record_path, metrics_json, data, metrics)
    log.info("%d of %d seeds scored: mean accuracy=%s", len(plan.scores), len(plan.seeds), metrics["accuracy"])
    return True


def _record_score(record: dict, record_path: Path, metrics_json: Path, data: bytes, metrics: dict) -> None:
    """evaluate.json first: it vouches for metrics.json by its hash, so a metrics.json
    nobody vouches for (forged, edited) is never scored, and a kill between the two
    writes leaves no metrics.json (the cell reruns)."""
    digest = hashlib.sha256(data).hexdigest()
    record.update(status="scored", accuracy=metrics["accuracy"], metrics_sha256=digest, ended_at=iso_utc(time.time()))
    atomic_write_json(record_path, record)
    atomic_write_bytes(metrics_json, data)


def _record_failure(record: dict, steps: int, record_path: Path) -> None:
    """evaluate.json of a run in which no attempt scored (with seeds: the first seed
    never scored): why, from the last attempt."""
    tried, last = len(record["attempts"]), record["attempts"][-1]
    first = f"the first seed ({record['seeds']['evaluated'][0]}) scored in none; " if record.get("seeds") else ""
    record.update(
        status="failed",
        reason=f"no valid metrics after {tried} attempts"
        + ("" if tried == steps or first else f" of {steps}")
        + f"; {first}last: evaluate.py {last['process']}, {last['problem']}",
        ended_at=iso_utc(time.time()),
    )
    atomic_write_json(record_path, record)


def _solved(solve_json: Path, record: dict[str, Any], record_path: Path) -> SolveRecord:
    """The solve record, when it names a final model to score; else the stage ends here."""
    solve = SolveRecord.read(solve_json)
    if solve is None:
        raise HarnessError(f"{solve_json}: missing or not valid JSON; rerun the solve")
    if not solve.final_model_files:
        why = solve.agent_problem or "left no final model"
        described = solve.description if solve.description is not None else "?"
        record.update(status="no_model", reason=f"agent {described} and {why}")
        atomic_write_json(record_path, record)
        raise HarnessError(f"nothing to score: {record['reason']}")
    return solve


def _write_provenance(campaign: Campaign, cell: Cell, solve: SolveRecord, job: ScorerJob, cell_dir: Path) -> None:
    """provenance.json. A record, never a reason to fail the stage. The scorer's package
    versions are asked inside its own sandbox, not in the background beside the
    attempts: the attempts' clean-up stops every child process of the stage."""
    try:
        launch = job.sandbox.launch(job.versions_request(versions_command()))
        packages = scorer_versions(launch.argv, launch.env, launch.cwd)
        atomic_write_json(
            cell_dir / PROVENANCE,
            cell_provenance(
                campaign, cell, solve=solve, gpus=job.gpu_set.gpus, nvml=job.nvml, scorer_packages=packages
            ),
        )
    except Exception as e:
        log.warning("%s not written: %s: %s", PROVENANCE, type(e).__name__, e)
