"""The solve stage of one cell: prepare a job dir, run the agent under its budget, record.

Contract with Snakemake: the job succeeds whenever the harness did its part, whatever
the agent did; ``solve.json`` says what the agent did. The job fails only when the
harness or the machine failed (no scratch space, a copy that failed), and then the job
dir is kept and its path logged, so nothing the agent produced is lost.

The steps live by concern: the job dir and prompt (``job_dir``), the agent's variables
and launch request (``agent_launch``), the settled run (``solve_run``), the CUDA
preflight (``preflight``), reprompt (``reprompt``), delivery of what the agent left
(``solve_delivery``) and the record (``solve_record``); this module orders them.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.scoring import write_template_bundle
from ptb_harness.campaign.tasks import TaskSpec
from ptb_harness.core.cell_files import PREFLIGHT
from ptb_harness.core.errors import HarnessError, Interrupted
from ptb_harness.core.records import atomic_write_json, file_sha256
from ptb_harness.gpu.cellset import GpuSet, job_gpu_set
from ptb_harness.gpu.nvml import load_nvml
from ptb_harness.runtime.caps import confine_cell
from ptb_harness.runtime.cgroups import cgroup_name
from ptb_harness.runtime.hf_cache import hf_cache_view
from ptb_harness.runtime.procs import ProcessResult, describe, iso_utc
from ptb_harness.runtime.sandbox import Launch
from ptb_harness.stages.agent_launch import agent_variables
from ptb_harness.stages.attempts import begin_attempt, update_attempt
from ptb_harness.stages.evidence import hand_checker, load_test_set, recording
from ptb_harness.stages.job_dir import prepare_job_dir, render_prompt, write_timer
from ptb_harness.stages.llm_gateway import cell_gateway, llm_record
from ptb_harness.stages.preflight import run_preflight
from ptb_harness.stages.reprompt import resume_while_asked
from ptb_harness.stages.solve_delivery import deliver_outputs, keep_agent_files
from ptb_harness.stages.solve_record import solve_record
from ptb_harness.stages.solve_run import SolveRun

log = logging.getLogger("ptb_harness.stages.solve")


def run_solve(
    campaign: Campaign,
    cell: Cell,
    *,
    solve_json: Path,
    raw_trace: Path,
    final_model: Path,
    host_env: Mapping[str, str] | None = None,
) -> dict:
    """Run one cell's agent and write its outputs: prepare -> launch -> deliver -> record.
    Returns the solve record."""
    host_env = dict(os.environ if host_env is None else host_env)
    site = campaign.settings.site
    problem = site.scratch_problem()
    if problem:
        raise HarnessError(f"site.tmp_root: {problem}")
    nvml = load_nvml()
    cell_dir = solve_json.parent
    # one attempt per cell: refused while an earlier one may still run, counted otherwise
    n = begin_attempt(cell_dir, host_env)["n"]
    # the job's GPUs (leased on machines without a scheduler), held until the record is written
    with job_gpu_set(cell.num_gpus, site.gpu.assignment, host_env, nvml) as gpu_set:
        run = _prepare(campaign, cell, host_env, gpu_set, nvml, cell_dir, n)
        try:
            result, launch, resumes, llm, caps = _launch(run)
            delivered = deliver_outputs(run, final_model, raw_trace)
            files_problem = keep_agent_files(run)
            # what the harness did after the agent's clock stopped: leftovers, cgroup, delivery
            after_s = time.time() - result.ended_at
            record = solve_record(run, result, launch, resumes, delivered, llm, caps, files_problem, after_s)
            atomic_write_json(solve_json, record)
            update_attempt(cell_dir, n, ended_at=iso_utc(time.time()), status="done")
        except Interrupted as e:
            # stopped from outside (Ctrl-C, the workflow manager, the scheduler): the agent
            # is gone, nothing of this try is kept, and a rerun redoes the cell
            log.error("solve interrupted by signal %d; job dir removed", e.signum)
            update_attempt(cell_dir, n, ended_at=iso_utc(time.time()), status=f"interrupted (signal {e.signum})")
            shutil.rmtree(run.job.root, ignore_errors=True)
            run.trace.unlink(missing_ok=True)
            raise
        except BaseException as e:
            log.error("harness failed; job dir kept for inspection: %s", run.job.root)
            # why, for the next attempt's record (earlier_attempts): e.g. the LLM gateway died
            why = str(e)[:500] if isinstance(e, HarnessError) else type(e).__name__
            update_attempt(cell_dir, n, ended_at=iso_utc(time.time()), failure=why)
            raise
    if not site.keep_job_dir:
        shutil.rmtree(run.job.root, ignore_errors=True)
    return record


def _agent_chat_template(campaign: Campaign, cell: Cell, task: TaskSpec, task_copy: Path) -> None:
    """The chat template the scorer will use, in the agent's copy of the task, so its own
    runs of evaluate.py render prompts as the final scoring does (without it they say how
    to name one; the agent's run still starts)."""
    try:
        write_template_bundle(campaign, cell.model, task, task_copy)
    except HarnessError as e:
        log.warning("no chat template in the agent's task dir: %s", e)


def _prepare(
    campaign: Campaign, cell: Cell, host_env: Mapping[str, str], gpu_set: GpuSet, nvml: Any, cell_dir: Path, n: int
) -> SolveRun:
    """The job dir with everything the agent may see, its variables, and its deadline."""
    agent, task = campaign.agent(cell.agent), campaign.task(cell.task)
    gpus = gpu_set.sandbox_ids()
    gpu_info = ", ".join(f"{g.name} {g.uuid}" for g in gpu_set.gpus) or ", ".join(gpus) or "no GPU"
    prompt = render_prompt(campaign, cell, task, campaign.model_source(cell.model), gpu_info)
    (cell_dir / PREFLIGHT).unlink(missing_ok=True)
    job = prepare_job_dir(campaign.settings.site.tmp_root, cell, agent, task, prompt)
    _agent_chat_template(campaign, cell, task, job.task)
    # with the judge: its test set, read once (for the recorder), and the agent's own check of it
    test_set = load_test_set(campaign, task) if campaign.settings.judge.enabled else None
    if test_set is not None:
        hand_checker(campaign, task, job, test_set)
    update_attempt(cell_dir, n, job_dir=str(job.root))
    log.info("job dir %s (attempt %d)", job.root, n)
    variables = agent_variables(campaign, cell, agent, task, prompt)
    missing = variables.missing(host_env)
    if missing:
        log.warning("variables not set in the launching environment, not passed: %s", ", ".join(missing))
    budget_s = cell.budget_seconds
    started = time.time()
    write_timer(job, started + budget_s)
    return SolveRun(
        campaign=campaign,
        cell=cell,
        agent=agent,
        task=task,
        job=job,
        host_env=host_env,
        gpu_set=gpu_set,
        nvml=nvml,
        variables=variables,
        cell_dir=cell_dir,
        started=started,
        budget_s=budget_s,
        limit_s=campaign.settings.solve.time_limit_s(budget_s),
        attempt=n,
        solve_sh_sha256=file_sha256(job.home / "solve.sh"),  # the copy that runs
        test_set=test_set,
    )


def _launch(run: SolveRun) -> tuple[ProcessResult, Launch, list[dict], dict | None, dict]:
    """The CUDA preflight (cells with GPUs), then the cell's LLM gateway and the agent
    under its time limit, resumed while its entry asks for it and time is left, every
    launch confined by the cell's caps. Returns how it ended (over all turns), its first
    launch, the resumes, the gateway's meter and what the caps held (read before the
    cell's cgroup goes)."""
    site = run.campaign.settings.site
    cgroup = cgroup_name(run.cell.slug, run.attempt)
    with hf_cache_view(site.hf_cache, run.job.root) as hf_view, confine_cell(site.agent_limits, cgroup) as caps:
        run = run.confined(caps)
        log.info("caps: %s", caps.describe())
        if run.cell.num_gpus:
            run_preflight(run, hf_view)
        gateway_args = (run.campaign, run.cell, run.agent, run.host_env, run.cell_dir, run.attempt, run.job.harness)
        secret_names = [*run.variables.pass_names, *run.campaign.settings.grader_key_names]
        evidence = (run.campaign, run.task, run.job, run.cell_dir, run.test_set, secret_names, run.host_env)
        with cell_gateway(*gateway_args) as gateway, recording(*evidence) as recorder:
            run = dataclasses.replace(run, gateway=gateway, recorder_pid=recorder.pid if recorder else None)
            launch = run.launch(hf_view)
            log.info(
                "agent %s starts (runtime %s): budget %.0f s, stopped at %.0f s",
                run.cell.agent,
                site.runtime.runtime,
                run.budget_s,
                run.limit_s,
            )
            # recorded BEFORE the agent starts: an agent can kill the harness at once, and a
            # try it had must never read as one it did not
            update_attempt(run.cell_dir, run.attempt, status="agent started")
            result = run.run_agent(launch, run.limit_s)
            result, resumes = resume_while_asked(run, hf_view, result)
            llm = llm_record(gateway, result)
        held = caps.record()
    log.info("agent %s after %.1f s", describe(result), result.duration_s)
    if llm is not None:
        used = {k: llm[k] for k in ("requests", "input_tokens", "output_tokens", "cost_usd")}
        log.info("LLM use (gateway): %s", used)
    if held["hit"]:
        log.warning("%s", held["hit"])
    return result, launch, resumes, llm, held
