"""The solve stage of one cell: prepare a job dir, run the agent under its budget, record.

Contract with Snakemake: the job succeeds whenever the harness did its part, whatever
the agent did; ``solve.json`` says what the agent did. The job fails only when the
harness or the machine failed (no scratch space, a copy that failed), and then the job
dir is kept and its path logged, so nothing the agent produced is lost.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import socket
import string
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ptb_harness import __version__
from ptb_harness.campaign.agents import AgentSpec, allowed_env_names, load_agent
from ptb_harness.campaign.cells import Campaign, Cell
from ptb_harness.campaign.graders import grader_key_names
from ptb_harness.campaign.tasks import TaskSpec, load_task
from ptb_harness.core.errors import HarnessError
from ptb_harness.core.records import atomic_write_json, atomic_write_text
from ptb_harness.gpu.cellset import GpuAssignment, GpuSet, job_gpu_set
from ptb_harness.gpu.monitor import GpuMonitor
from ptb_harness.gpu.nvml import load_nvml
from ptb_harness.runtime.hf_cache import hf_cache_view
from ptb_harness.runtime.procs import ProcessResult, describe, iso_utc, run_budgeted, utc_stamp
from ptb_harness.runtime.sandbox import Bind, Launch, Sandbox
from ptb_harness.runtime.scheduler import scheduler_job
from ptb_harness.runtime.snapshot import provenance
from ptb_harness.stages.agent_files import save_agent_files
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


def run_preflight(
    campaign: Campaign,
    cell: Cell,
    gpu_set: GpuSet,
    sandbox_launch: Callable[[list[str]], Launch],
    log_path: Path,
) -> tuple[bool, str]:
    """(ok, reason) of the CUDA preflight; only called for cells that need GPUs."""
    ids = gpu_set.sandbox_ids()
    if not gpu_set.driver:
        return False, "no NVIDIA driver on this machine"
    if gpu_set.request.known and len(ids) != cell.num_gpus:
        return False, f"the job was given {len(ids)} GPU(s) by {gpu_set.request.source}, the cell needs {cell.num_gpus}"
    launch = sandbox_launch(preflight_command(cell.num_gpus))
    result = run_budgeted(
        launch.argv,
        env=launch.env,
        cwd=launch.cwd,
        output=log_path,
        budget_s=float(campaign.config["site"]["preflight_timeout_seconds"]),
        kill_grace_s=5,
    )
    if result.status == "timeout":
        return False, "preflight did not finish in time"
    return verdict(log_path.read_text(errors="replace"))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_scratch(tmp_root: Path, min_free_gb: float) -> None:
    try:
        free = shutil.disk_usage(tmp_root).free
    except OSError as e:
        raise HarnessError(f"site.tmp_root: cannot use {tmp_root} ({e.strerror})") from None
    if free < min_free_gb * 1e9:
        raise HarnessError(
            f"site.tmp_root: {tmp_root} has {free / 1e9:.2f} GB free, below site.min_tmp_free_gb={min_free_gb}"
        )


def render_prompt(campaign: Campaign, cell: Cell, task: TaskSpec, model_source: str, gpu_info: str) -> str:
    custom = campaign.config["solve"].get("prompt_template")
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


def agent_variables(
    campaign: Campaign, cell: Cell, agent: AgentSpec, task: TaskSpec, prompt: str
) -> tuple[dict[str, str], list[str]]:
    """The harness's variables for the agent, and the names it may copy from the host.

    Nothing else of the launching environment reaches the agent: the sandbox adds only
    HOME, TMPDIR, LANG, the cache variables and the cell's GPUs. Copied by name: the
    agent's env_passthrough.txt names and the allowlisted API keys (agent's + task's).
    """
    entry = campaign.agent_entries.get(cell.agent)
    variables = {
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
    grader_keys = grader_key_names(campaign.config)
    names = [n for n in allowed_env_names(agent, task.required_api_keys) if n not in grader_keys]
    return variables, names


def agent_launch(
    campaign: Campaign,
    cell: Cell,
    agent: AgentSpec,
    task: TaskSpec,
    job: JobDir,
    prompt: str,
    host_env: Mapping[str, str],
    gpus: list[str],
    hf_home: Path | None = None,
    hf_read_only: bool = False,
    command: list[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> Launch:
    variables, names = agent_variables(campaign, cell, agent, task, prompt)
    variables.update(extra_env or {})
    model = campaign.models[cell.model]
    binds = [Bind(Path(variables["MODEL_TO_TRAIN"]), variables["MODEL_TO_TRAIN"], True)] if model.path else []
    return Sandbox(campaign.config["site"], host_env).launch(
        role="agent",
        command=command or ["bash", "../solve.sh"],  # relative to HOME/task in every runtime
        job_home=job.home,
        job_tmp=job.tmp,
        workdir="task",
        env=variables,
        pass_names=names,
        gpus=gpus,
        binds=binds,
        hf_home_host=hf_home,
        hf_read_only=hf_read_only,
    )


def _count_files(root: Path) -> tuple[int, int]:
    files = size = 0
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            if p.is_file():
                files += 1
                size += p.stat().st_size
    return files, size


def _move_tree(src: Path, dst: Path) -> None:
    """Move a directory into place; copies (following links) when src is a link or on another disk."""
    if dst.exists() or dst.is_symlink():
        shutil.rmtree(dst) if dst.is_dir() and not dst.is_symlink() else dst.unlink()
    if not src.is_symlink():
        try:
            os.rename(src, dst)
            return
        except OSError:
            pass
    shutil.copytree(src.resolve(), dst, symlinks=False)


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


def run_solve(
    campaign: Campaign,
    cell: Cell,
    *,
    solve_json: Path,
    raw_trace: Path,
    final_model: Path,
    host_env: Mapping[str, str] | None = None,
) -> dict:
    """Run one cell's agent and write its outputs. Returns the solve record."""
    host_env = dict(os.environ if host_env is None else host_env)
    site = campaign.config["site"]
    solve_cfg = campaign.config["solve"]
    agent = load_agent(campaign.agent_dir(cell.agent))
    task = load_task(campaign.task_dir(cell.task))
    tmp_root = Path(site["tmp_root"] or tempfile.gettempdir())
    check_scratch(tmp_root, site["min_tmp_free_gb"])

    model_source = campaign.model_source(cell.model)
    nvml = load_nvml()
    held = contextlib.ExitStack()  # the job's GPUs (leased on machines without a scheduler)
    assignment = GpuAssignment(site.get("gpu_ids"), site.get("gpu_pool"), site.get("gpu_lock_dir"))
    gpu_set = held.enter_context(job_gpu_set(cell.num_gpus, assignment, host_env, nvml))
    gpus = gpu_set.sandbox_ids()
    gpu_info = ", ".join(f"{g.name} {g.uuid}" for g in gpu_set.gpus) or ", ".join(gpus) or "no GPU"
    prompt = render_prompt(campaign, cell, task, model_source, gpu_info)
    cell_dir = solve_json.parent
    (cell_dir / "preflight.json").unlink(missing_ok=True)
    job = prepare_job_dir(tmp_root, cell, agent, task, prompt)
    log.info("job dir %s", job.root)
    try:
        _variables, names = agent_variables(campaign, cell, agent, task, prompt)
        passed = [n for n in names if n in host_env]
        missing = [n for n in names if n not in host_env]
        if missing:
            log.warning("variables not set in the launching environment, not passed: %s", ", ".join(missing))
        budget_s = cell.budget_seconds
        limit_s = budget_s + 60 * float(solve_cfg["timeout_margin_minutes"])
        started = time.time()
        deadline = started + budget_s
        (job.home / "timer.sh").write_text(_TIMER.format(deadline=int(deadline), deadline_iso=iso_utc(deadline)))
        trace_tmp = job.harness / "solve_out.txt"
        with hf_cache_view(site, job.root) as (hf_home, hf_ro):
            if cell.num_gpus:
                ok, reason = run_preflight(
                    campaign,
                    cell,
                    gpu_set,
                    lambda cmd: agent_launch(
                        campaign, cell, agent, task, job, prompt, host_env, gpus, hf_home, hf_ro, command=cmd
                    ),
                    job.harness / "preflight.log",
                )
                atomic_write_json(
                    cell_dir / "preflight.json",
                    {"status": "ok" if ok else "failed", "reason": reason, "gpus": gpus, "host": socket.gethostname()},
                )
                if not ok:
                    # an infrastructure failure: the job fails (nothing of the cell is lost,
                    # the agent never started) so a rerun or a scheduler retry tries again
                    raise HarnessError(f"CUDA preflight failed, agent not started: {reason}")
                log.info("CUDA preflight: %s", reason)
            launch = agent_launch(campaign, cell, agent, task, job, prompt, host_env, gpus, hf_home, hf_ro)
            log.info(
                "agent %s starts (runtime %s): budget %.0f s, stopped at %.0f s",
                cell.agent,
                site["runtime"],
                budget_s,
                limit_s,
            )
            with GpuMonitor.for_cell(nvml, gpu_set.gpus, cell_dir, "solve", site):
                result = run_budgeted(
                    launch.argv,
                    env=launch.env,
                    cwd=launch.cwd,
                    output=trace_tmp,
                    budget_s=limit_s,
                    kill_grace_s=float(solve_cfg["kill_grace_seconds"]),
                )
            entry = campaign.agent_entries.get(cell.agent)
            resumes: list[dict] = []
            min_left_s = 60 * float(solve_cfg["reprompt_min_minutes"])
            while entry is not None and entry.reprompt and should_resume(result, deadline - time.time(), min_left_s):
                left = deadline - time.time()
                message = resume_message(left)
                log.info("agent ended with %.0f s left: resume %d of its session", left, len(resumes) + 1)
                with open(trace_tmp, "ab") as f:  # a marker between the turns, in the trace
                    f.write(f"[{utc_stamp()}] ptb-harness: resume {len(resumes) + 1}: {message}\n".encode())
                launch = agent_launch(
                    campaign, cell, agent, task, job, prompt, host_env, gpus, hf_home, hf_ro,
                    extra_env={"PTB_RESUME": str(len(resumes) + 1), "PTB_RESUME_MESSAGE": message},
                )  # fmt: skip
                with GpuMonitor.for_cell(nvml, gpu_set.gpus, cell_dir, "solve", site):
                    turn = run_budgeted(
                        launch.argv,
                        env=launch.env,
                        cwd=launch.cwd,
                        output=trace_tmp,
                        budget_s=max(0.0, started + limit_s - time.time()),
                        kill_grace_s=float(solve_cfg["kill_grace_seconds"]),
                        append=True,
                    )
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
        log.info("agent %s after %.1f s", describe(result), result.duration_s)

        produced = job.task / "final_model"
        present = produced.is_dir() or produced.is_symlink()  # before the move below takes it away
        final_model.parent.mkdir(parents=True, exist_ok=True)
        if produced.is_dir():
            _move_tree(produced, final_model)
        else:
            log.warning("agent left no final_model/ directory")
            if final_model.exists():
                shutil.rmtree(final_model)
            final_model.mkdir()
        n_files, n_bytes = _count_files(final_model)
        _move_tree_file(trace_tmp, raw_trace)

        record = {
            "cell": cell.wildcards,
            "status": result.status,
            "exit_code": result.exit_code,
            "signal": result.signal,
            "description": describe(result),
            "started_at": iso_utc(result.started_at),
            "ended_at": iso_utc(result.ended_at),
            "duration_s": round(result.duration_s, 3),
            "budget_s": budget_s,
            "resumes": resumes,
            "time_limit_s": limit_s,
            "host": socket.gethostname(),
            "scheduler": scheduler_job(host_env),
            "final_model_present": present,
            "final_model_files": n_files,
            "final_model_bytes": n_bytes,
            "model_to_train": model_source,
            "gpus": [{"index": g.index, "uuid": g.uuid, "name": g.name} for g in gpu_set.gpus],
            "gpu_source": gpu_set.request.source if cell.num_gpus else None,
            "env_passed": sorted(passed),
            "sandbox_env_names": launch.visible_names,
            "env_missing": sorted(missing),
            "solve_sh_sha256": _sha256(agent.solve_sh),
            "harness": {"version": __version__, "runtime": site["runtime"], "site": site["name"], **provenance()},
        }
        atomic_write_json(solve_json, record)
    except BaseException:
        log.error("harness failed; job dir kept for inspection: %s", job.root)
        raise
    finally:
        held.close()
    _keep_agent_files(campaign, job, task, cell_dir, names, host_env)
    if not site["keep_job_dir"]:
        shutil.rmtree(job.root, ignore_errors=True)
    return record


def _keep_agent_files(
    campaign: Campaign, job: JobDir, task: TaskSpec, cell_dir: Path, names: list[str], host_env: Mapping[str, str]
) -> None:
    """The agent's files (no weights), sanitized, beside the cell for the judge. A record,
    never a reason to fail the solve: the judge says when they are missing."""
    try:
        secrets = secrets_from_env([*names, *grader_key_names(campaign.config)], host_env)
        max_bytes = int(float(campaign.config["site"]["agent_files_max_mb"]) * 1e6)
        kept = save_agent_files(job.home, task.dir, cell_dir, Redactor(secrets), max_bytes)
        log.info(
            "agent files kept: %d (%d bytes), %d left out", len(kept["saved"]), kept["bytes"], len(kept["skipped"])
        )
    except Exception as e:  # the solve's outputs are written; keep them
        log.warning("agent files not kept: %s: %s", type(e).__name__, e)


def _move_tree_file(src: Path, dst: Path) -> None:
    """Rename a file into place; across disks, copy to a temp file beside dst, then rename."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(src, dst)
    except OSError:
        tmp = dst.with_name(f".{dst.name}.tmp")
        shutil.copy2(src, tmp)
        os.replace(tmp, dst)
