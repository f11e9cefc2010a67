"""The solve stage of one cell: prepare a job dir, run the agent under its budget, record.

Contract with Snakemake: the job succeeds whenever the harness did its part, whatever
the agent did; ``solve.json`` says what the agent did. The job fails only when the
harness or the machine failed (no scratch space, a copy that failed), and then the job
dir is kept and its path logged, so nothing the agent produced is lost.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import string
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ptb_harness import __version__
from ptb_harness.campaign.agents import AgentSpec, allowed_env_names
from ptb_harness.campaign.cells import Campaign, Cell
from ptb_harness.campaign.tasks import TaskSpec
from ptb_harness.core.errors import HarnessError, Interrupted
from ptb_harness.core.records import atomic_write_json, atomic_write_text, file_sha256
from ptb_harness.core.secrets import secret_needles
from ptb_harness.gpu.cellset import GpuSet, job_gpu_set
from ptb_harness.gpu.monitor import GpuMonitor
from ptb_harness.gpu.nvml import load_nvml
from ptb_harness.runtime.delivery import Delivery, deliver_file, deliver_tree
from ptb_harness.runtime.hf_cache import hf_cache_view
from ptb_harness.runtime.procs import ProcessResult, describe, iso_utc, utc_stamp
from ptb_harness.runtime.sandbox import Bind, Launch, LaunchRequest, Sandbox
from ptb_harness.runtime.scheduler import scheduler_job
from ptb_harness.runtime.snapshot import provenance
from ptb_harness.stages.agent_files import save_agent_files
from ptb_harness.stages.attempts import begin_attempt, earlier_attempts, update_attempt
from ptb_harness.stages.preflight import preflight_command, verdict
from ptb_harness.traces.redact import Redactor, secrets_from_env

log = logging.getLogger("ptb_harness.stages.solve")

BUILTIN_PROMPT = Path(__file__).parents[1] / "templates" / "prompt.txt"

_TIMER = """#!/usr/bin/env bash
# Time left for this cell's agent. Written by the harness; the deadline is fixed.
deadline={deadline}
left=$(( deadline - $(date +%s) )); (( left < 0 )) && left=0
if [ "${{1:-}}" = "--seconds" ]; then echo "$left"; exit 0; fi
printf 'Remaining time: %d:%02d:%02d (deadline %s)\\n' $((left/3600)) $((left%3600/60)) $((left%60)) '{deadline_iso}'
"""


@dataclass(frozen=True)
class JobDir:
    """A cell's scratch directory. ``home`` is the agent's HOME; it works in ``home/task``."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def task(self) -> Path:
        return self.home / "task"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def harness(self) -> Path:
        return self.root / "harness"


def render_prompt(campaign: Campaign, cell: Cell, task: TaskSpec, model_source: str, gpu_info: str) -> str:
    custom = campaign.settings.solve.prompt_template
    if (task.dir / "prompt.txt").is_file():
        template_path = task.dir / "prompt.txt"
    elif custom:
        template_path = campaign.workdir / custom
    else:
        template_path = BUILTIN_PROMPT
    return string.Template(template_path.read_text(encoding="utf-8")).safe_substitute(
        model=model_source,
        benchmark=task.benchmark,
        task=task.name,
        num_hours=cell.hours,
        num_gpus=cell.num_gpus,
        gpu_info=gpu_info,
        datetime=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    )


def prepare_job_dir(tmp_root: Path, cell: Cell, agent: AgentSpec, task: TaskSpec, prompt: str) -> JobDir:
    """Copy everything the agent may see into a fresh scratch dir.

    solve.sh and payload/ are COPIED, so replacing the checkout's files while the cell
    runs cannot change or kill it (a replaced script once killed two 10-hour jobs).
    """
    try:
        job = JobDir(Path(tempfile.mkdtemp(prefix=f"ptb-{cell.slug}-", dir=tmp_root)))
    except OSError as e:
        raise HarnessError(f"site.tmp_root: cannot create the job dir in {tmp_root} ({e.strerror})") from None
    try:
        shutil.copytree(task.dir, job.task, symlinks=False)
        # evaluate.py's output of an earlier run must never be mistaken for the agent's model
        shutil.rmtree(job.task / "final_model", ignore_errors=True)
        shutil.copy2(agent.solve_sh, job.home / "solve.sh")
        if agent.payload is not None:
            shutil.copytree(agent.payload, job.home / "agent", symlinks=False)
        job.tmp.mkdir()
        job.harness.mkdir()
        atomic_write_text(job.home / "prompt.txt", prompt)
    except (OSError, shutil.Error) as e:
        shutil.rmtree(job.root, ignore_errors=True)  # a half-copied job dir helps nobody
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)[:200]
        if isinstance(e, shutil.Error) and "No space left" in str(e):
            why = "No space left on device"
        raise HarnessError(f"site.tmp_root: preparing the job dir in {tmp_root} failed ({why})") from None
    return job


class AgentVariables(NamedTuple):
    """The harness's variables for the agent, and the names it may copy from the host.

    Nothing else of the launching environment reaches the agent: the sandbox adds only
    HOME, TMPDIR, LANG, the cache variables and the cell's GPUs. Copied by name: the
    agent's env_passthrough.txt names and the allowlisted API keys (agent's + task's).
    """

    values: dict[str, str]
    pass_names: list[str]

    def passed(self, host_env: Mapping[str, str]) -> list[str]:
        return [n for n in self.pass_names if n in host_env]

    def missing(self, host_env: Mapping[str, str]) -> list[str]:
        return [n for n in self.pass_names if n not in host_env]


def agent_variables(campaign: Campaign, cell: Cell, agent: AgentSpec, task: TaskSpec, prompt: str) -> AgentVariables:
    entry = campaign.agent_entries.get(cell.agent)
    values = {
        # the entry's non-secret settings (checked: they cannot replace the harness's)
        **dict(entry.env if entry else ()),
        "PROMPT": prompt,
        "NUM_GPUS": str(cell.num_gpus),
        "NUM_HOURS": cell.hours,
        "BENCHMARK_ID": task.name,
        "MODEL_TO_TRAIN": campaign.model_source(cell.model),
        "AGENT_CONFIG": campaign.agent_config(cell.agent),
        "AGENT_MODEL": campaign.agent_config(cell.agent),
    }
    # grader and judge keys never reach an agent (the config check refuses such a
    # campaign; this keeps it so for any caller)
    grader_keys = campaign.settings.grader_key_names
    names = [n for n in allowed_env_names(agent, task.required_api_keys) if n not in grader_keys]
    return AgentVariables(values, names)


def agent_request(
    campaign: Campaign,
    cell: Cell,
    job: JobDir,
    variables: AgentVariables,
    gpus: list[str],
    hf_view: tuple[Path | None, bool] = (None, False),
    command: list[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> LaunchRequest:
    """The agent's launch request: solve.sh (or ``command``, e.g. the preflight) in
    HOME/task, with the cell's variables (and ``extra_env``, e.g. a resume's), GPUs and model."""
    model = campaign.models[cell.model]
    source = variables.values["MODEL_TO_TRAIN"]
    return LaunchRequest(
        role="agent",
        command=command or ["bash", "../solve.sh"],  # relative to HOME/task in every runtime
        job_home=job.home,
        job_tmp=job.tmp,
        workdir="task",
        env={**variables.values, **(extra_env or {})},
        pass_names=variables.pass_names,
        gpus=gpus,
        binds=[Bind(Path(source), source, True)] if model.path else [],
        hf_home_host=hf_view[0],
        hf_read_only=hf_view[1],
    )


def scratch_filled(job_root: Path) -> str | None:
    """'the agent filled its scratch (N GB)' when the job dir's filesystem has (almost)
    no room left after the agent (under 64 MiB, or 2% on a small one): an agent outcome,
    not a harness failure."""
    try:
        st = os.statvfs(job_root)
    except OSError:
        return None
    if st.f_bavail * st.f_frsize >= min(64 * 2**20, 0.02 * st.f_blocks * st.f_frsize):
        return None
    used = 0
    for dirpath, _dirs, names in os.walk(job_root):
        for n in names:
            with contextlib.suppress(OSError):
                used += os.lstat(os.path.join(dirpath, n)).st_blocks * 512
    return f"the agent filled its scratch ({used / 1e9:.2f} GB)"


def should_resume(result: ProcessResult, left_s: float, min_left_s: float) -> bool:
    """Resume the CLI's session (reprompt) when it ended on its own, successfully, with
    at least min_left_s of the budget left. A failing CLI is not resumed: it would fail
    again at once, over and over, until the budget ran out."""
    return result.status == "exited" and result.exit_code == 0 and left_s >= min_left_s


def resume_message(left_s: float) -> str:
    left = max(0, int(left_s))
    return (
        f"You still have {left // 3600}h {left % 3600 // 60}m remaining of your time budget. "
        "Continue working on the task: improve the model further and make sure final_model/ holds your best model."
    )


@dataclass(frozen=True)
class SolveRun:
    """What ``_prepare`` settled for one cell's solve; the later steps only read it."""

    campaign: Campaign
    cell: Cell
    agent: AgentSpec
    task: TaskSpec
    job: JobDir
    host_env: Mapping[str, str]
    gpu_set: GpuSet
    nvml: Any
    variables: AgentVariables
    cell_dir: Path
    #: when the agent's clock started, and its budget and hard limit from then
    started: float
    budget_s: float
    limit_s: float
    #: the how-manyth try of this cell (ptb_harness.stages.attempts)
    attempt: int
    #: sha256 of the job dir's copy of solve.sh, taken before the agent could change it
    solve_sh_sha256: str

    @property
    def gpus(self) -> list[str]:
        return self.gpu_set.sandbox_ids()

    @property
    def trace(self) -> Path:
        """Written beside the results, outside anything the agent can write: an agent that
        fills its scratch cannot cut it short (or replace it by a link)."""
        return self.cell_dir / ".solve_out.txt.partial"

    def launch(
        self,
        hf_view: tuple[Path | None, bool],
        command: list[str] | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> Launch:
        request = agent_request(
            self.campaign, self.cell, self.job, self.variables, self.gpus, hf_view, command, extra_env
        )
        return Sandbox(self.campaign.settings.site.runtime, self.host_env).launch(request)

    def run_agent(self, launch: Launch, budget_s: float, *, append: bool = False) -> ProcessResult:
        """One turn of the agent, to its trace, while the GPU monitor samples its cards."""
        site, solve = self.campaign.settings.site, self.campaign.settings.solve
        monitor = GpuMonitor.for_cell(
            self.nvml, self.gpu_set.gpus, self.cell_dir, "solve", site.gpu.monitor_interval_seconds
        )
        with monitor:
            return launch.run(
                self.trace,
                budget_s=budget_s,
                kill_grace_s=float(solve.kill_grace_seconds),
                append=append,
                on_start=lambda pid: update_attempt(self.cell_dir, self.attempt, agent_pid=pid),
                max_output_bytes=site.trace_max_bytes,
            )


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
            result, launch, resumes = _launch(run)
            delivered = _deliver(run, final_model, raw_trace)
            record = _record(run, result, launch, resumes, delivered)
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
        except BaseException:
            log.error("harness failed; job dir kept for inspection: %s", run.job.root)
            update_attempt(cell_dir, n, ended_at=iso_utc(time.time()))
            raise
    _keep_agent_files(run)
    if not site.keep_job_dir:
        shutil.rmtree(run.job.root, ignore_errors=True)
    return record


def _prepare(
    campaign: Campaign, cell: Cell, host_env: Mapping[str, str], gpu_set: GpuSet, nvml: Any, cell_dir: Path, n: int
) -> SolveRun:
    """The job dir with everything the agent may see, its variables, and its deadline."""
    agent, task = campaign.agent(cell.agent), campaign.task(cell.task)
    gpus = gpu_set.sandbox_ids()
    gpu_info = ", ".join(f"{g.name} {g.uuid}" for g in gpu_set.gpus) or ", ".join(gpus) or "no GPU"
    prompt = render_prompt(campaign, cell, task, campaign.model_source(cell.model), gpu_info)
    (cell_dir / "preflight.json").unlink(missing_ok=True)
    job = prepare_job_dir(campaign.settings.site.tmp_root, cell, agent, task, prompt)
    update_attempt(cell_dir, n, job_dir=str(job.root))
    log.info("job dir %s (attempt %d)", job.root, n)
    variables = agent_variables(campaign, cell, agent, task, prompt)
    missing = variables.missing(host_env)
    if missing:
        log.warning("variables not set in the launching environment, not passed: %s", ", ".join(missing))
    budget_s = cell.budget_seconds
    started = time.time()
    deadline = started + budget_s
    (job.home / "timer.sh").write_text(_TIMER.format(deadline=int(deadline), deadline_iso=iso_utc(deadline)))
    limit_s = campaign.settings.solve.time_limit_s(budget_s)
    solve_sh_sha256 = file_sha256(job.home / "solve.sh")  # the copy that runs
    return SolveRun(
        campaign,
        cell,
        agent,
        task,
        job,
        host_env,
        gpu_set,
        nvml,
        variables,
        cell_dir,
        started,
        budget_s,
        limit_s,
        n,
        solve_sh_sha256,
    )


def _launch(run: SolveRun) -> tuple[ProcessResult, Launch, list[dict]]:
    """The CUDA preflight (cells with GPUs), then the agent under its time limit, resumed
    while its entry asks for it and time is left. Returns how it ended (over all turns),
    its first launch and the resumes."""
    site = run.campaign.settings.site
    with hf_cache_view(site.hf_cache, run.job.root) as hf_view:
        if run.cell.num_gpus:
            _preflight(run, hf_view)
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
        result, resumes = _resume(run, hf_view, result)
    log.info("agent %s after %.1f s", describe(result), result.duration_s)
    return result, launch, resumes


def _resume(
    run: SolveRun, hf_view: tuple[Path | None, bool], result: ProcessResult
) -> tuple[ProcessResult, list[dict]]:
    """Reprompt: while the entry asks for it and the CLI ended early and well, resume its
    session with the time left. Returns how the last turn ended (from the first's start)."""
    entry = run.campaign.agent_entries.get(run.cell.agent)
    resumes: list[dict] = []
    deadline = run.started + run.budget_s
    min_left_s = 60 * float(run.campaign.settings.solve.reprompt_min_minutes)
    while entry is not None and entry.reprompt and should_resume(result, deadline - time.time(), min_left_s):
        left = deadline - time.time()
        message = resume_message(left)
        log.info("agent ended with %.0f s left: resume %d of its session", left, len(resumes) + 1)
        with open(run.trace, "ab") as f:  # a marker between the turns, in the trace
            f.write(f"[{utc_stamp()}] ptb-harness: resume {len(resumes) + 1}: {message}\n".encode())
        resume_env = {"PTB_RESUME": str(len(resumes) + 1), "PTB_RESUME_MESSAGE": message}
        # a resumed turn is stopped at the first turn's hard limit
        left_to_limit = max(0.0, run.started + run.limit_s - time.time())
        turn = run.run_agent(run.launch(hf_view, extra_env=resume_env), left_to_limit, append=True)
        resumes.append(
            {
                "started_at": iso_utc(turn.started_at),
                "time_left_s": round(left, 1),
                "message": message,
                "status": turn.status,
                "exit_code": turn.exit_code,
                "duration_s": round(turn.duration_s, 3),
            }
        )
        result = ProcessResult(turn.status, turn.exit_code, turn.signal, result.started_at, turn.ended_at)
    return result, resumes


def _preflight(run: SolveRun, hf_view: tuple[Path | None, bool]) -> None:
    """Check the cell's GPUs in the agent's own sandbox; preflight.json says how it went.
    A failure is the infrastructure's: the job fails (nothing of the cell is lost, the
    agent never started) so a rerun or a scheduler retry tries again."""
    ok, reason = _preflight_verdict(run, hf_view)
    atomic_write_json(
        run.cell_dir / "preflight.json",
        {"status": "ok" if ok else "failed", "reason": reason, "gpus": run.gpus, "host": socket.gethostname()},
    )
    if not ok:
        raise HarnessError(f"CUDA preflight failed, agent not started: {reason}")
    log.info("CUDA preflight: %s", reason)


def _preflight_verdict(run: SolveRun, hf_view: tuple[Path | None, bool]) -> tuple[bool, str]:
    gpu_set, cell = run.gpu_set, run.cell
    ids = gpu_set.sandbox_ids()
    if not gpu_set.driver:
        return False, "no NVIDIA driver on this machine"
    if gpu_set.request.known and len(ids) != cell.num_gpus:
        return False, f"the job was given {len(ids)} GPU(s) by {gpu_set.request.source}, the cell needs {cell.num_gpus}"
    log_path = run.job.harness / "preflight.log"
    timeout_s = run.campaign.settings.site.gpu.preflight_timeout_seconds
    result = run.launch(hf_view, preflight_command(cell.num_gpus)).run(log_path, budget_s=timeout_s, kill_grace_s=5)
    if result.status == "timeout":
        return False, "preflight did not finish in time"
    return verdict(log_path.read_text(errors="replace"))


def _deliver(run: SolveRun, final_model: Path, raw_trace: Path) -> Delivery:
    """Move the agent's final_model/ (an empty one when it left none or it was refused)
    and its trace into the cell dir. Nothing of the job dir is followed out of it: lstat
    only, links refused, the size capped, no file holding a secret's value."""
    site = run.campaign.settings.site
    scratch_full = scratch_filled(run.job.root)
    secrets = secrets_from_env(run.variables.pass_names, run.host_env)
    delivery = deliver_tree(
        run.job.task / "final_model",
        final_model,
        label="final_model",
        max_bytes=site.final_model_max_bytes,
        needles=secret_needles(secrets),
        refuse=scratch_full,  # what it left may be cut short: not scored
    )
    if not delivery.present:
        log.warning("agent left no final_model/ directory")
    if delivery.problem:
        log.warning("agent_failed: %s", delivery.problem)
    trace_problem = deliver_file(run.trace, raw_trace, "the trace")
    if trace_problem:
        raise HarnessError(f"{trace_problem} ({run.trace})")
    return delivery


def _record(run: SolveRun, result: ProcessResult, launch: Launch, resumes: list[dict], delivered: Delivery) -> dict:
    """solve.json: how the agent ended, what it left, and what ran it."""
    cell, site = run.cell, run.campaign.settings.site
    return {
        "cell": cell.wildcards,
        "status": result.status,
        "exit_code": result.exit_code,
        "signal": result.signal,
        "description": describe(result),
        "started_at": iso_utc(result.started_at),
        "ended_at": iso_utc(result.ended_at),
        "duration_s": round(result.duration_s, 3),
        "budget_s": run.budget_s,
        "resumes": resumes,
        "time_limit_s": run.limit_s,
        "host": socket.gethostname(),
        "scheduler": scheduler_job(run.host_env),
        "final_model_present": delivered.present,
        "final_model_files": delivered.files,
        "final_model_bytes": delivered.size,
        # why what the agent left was refused (an agent outcome), None when it was not
        "agent_problem": delivered.problem,
        "model_to_train": run.variables.values["MODEL_TO_TRAIN"],
        "gpus": [{"index": g.index, "uuid": g.uuid, "name": g.name} for g in run.gpu_set.gpus],
        "gpu_source": run.gpu_set.request.source if cell.num_gpus else None,
        "env_passed": sorted(run.variables.passed(run.host_env)),
        "sandbox_env_names": launch.visible_names,
        "env_missing": sorted(run.variables.missing(run.host_env)),
        "solve_sh_sha256": run.solve_sh_sha256,
        "harness": {"version": __version__, "runtime": site.runtime.runtime, "site": site.name, **provenance()},
        # the how-manyth try of this cell, and the earlier tries in which the agent ran
        "attempt": run.attempt,
        "earlier_attempts": earlier_attempts(run.cell_dir, run.attempt),
    }


def _keep_agent_files(run: SolveRun) -> None:
    """The agent's files (no weights), sanitized, beside the cell for the judge. A record,
    never a reason to fail the solve: the judge says when they are missing."""
    settings = run.campaign.settings
    try:
        secrets = secrets_from_env([*run.variables.pass_names, *settings.grader_key_names], run.host_env)
        max_bytes = settings.site.agent_files_max_bytes
        kept = save_agent_files(run.job.home, run.task.dir, run.cell_dir, Redactor(secrets), max_bytes)
        log.info(
            "agent files kept: %d (%d bytes), %d left out", len(kept["saved"]), kept["bytes"], len(kept["skipped"])
        )
    except Exception as e:  # the solve's outputs are written; keep them
        log.warning("agent files not kept: %s: %s", type(e).__name__, e)
