"""The solve stage of one cell: prepare a job dir, run the agent under its budget, record.

Contract with Snakemake: the job succeeds whenever the harness did its part, whatever
the agent did; ``solve.json`` says what the agent did. The job fails only when the
harness or the machine failed (no scratch space, a copy that failed), and then the job
dir is kept and its path logged, so nothing the agent produced is lost.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import signal
import socket
import string
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ptb_harness import __version__
from ptb_harness.agents import AgentSpec, load_agent
from ptb_harness.campaign import Campaign, Cell
from ptb_harness.errors import HarnessError
from ptb_harness.procs import ProcessResult, iso_utc, run_budgeted
from ptb_harness.records import atomic_write_json, atomic_write_text
from ptb_harness.tasks import TaskSpec, load_task

log = logging.getLogger("ptb_harness.solve")

BUILTIN_PROMPT = Path(__file__).parent / "templates" / "prompt.txt"

#: Variables of the launching environment that the `none` runtime hands through,
#: besides what the harness sets itself. GPU visibility comes from the scheduler.
_HOST_VARS = ("PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")

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
    runs cannot change or kill it (seed item 5).
    """
    job = JobDir(Path(tempfile.mkdtemp(prefix=f"ptb-{cell.slug}-", dir=tmp_root)))
    shutil.copytree(task.dir, job.task, symlinks=False)
    # evaluate.py's output of an earlier run must never be mistaken for the agent's model
    shutil.rmtree(job.task / "final_model", ignore_errors=True)
    shutil.copy2(agent.solve_sh, job.home / "solve.sh")
    if agent.payload is not None:
        shutil.copytree(agent.payload, job.home / "agent", symlinks=False)
    job.tmp.mkdir()
    job.harness.mkdir()
    atomic_write_text(job.home / "prompt.txt", prompt)
    return job


def agent_env(
    *,
    host_env: Mapping[str, str],
    job: JobDir,
    campaign: Campaign,
    cell: Cell,
    agent: AgentSpec,
    task: TaskSpec,
    prompt: str,
) -> tuple[dict[str, str], list[str], list[str]]:
    """The agent's whole environment, and the names of passed and of missing variables.

    Nothing of the launching environment reaches the agent unless named here: the
    harness's own variables, a short list of host variables, the agent's
    env_passthrough.txt names and the allowlisted API keys (agent's + task's).
    """
    env = {k: host_env[k] for k in _HOST_VARS if k in host_env}
    # The `none` runtime has no image: the agent's `python` is the harness's interpreter.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
    env.setdefault("LANG", "C.UTF-8")
    env.update(
        HOME=str(job.home),
        TMPDIR=str(job.tmp),
        PYTHONNOUSERSITE="1",
        PROMPT=prompt,
        NUM_GPUS=str(cell.num_gpus),
        NUM_HOURS=cell.hours,
        BENCHMARK_ID=task.name,
        MODEL_TO_TRAIN=campaign.model_source(cell.model),
        AGENT_CONFIG=campaign.agent_config(cell.agent),
    )
    wanted = list(dict.fromkeys([*agent.env_passthrough, *agent.api_keys, *task.required_api_keys]))
    passed = [n for n in wanted if n in host_env]
    missing = [n for n in wanted if n not in host_env]
    for n in passed:
        env[n] = host_env[n]
    return env, passed, missing


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


def describe(result: ProcessResult) -> str:
    if result.status == "exited":
        return f"exited with code {result.exit_code}"
    name = signal.Signals(result.signal).name if result.signal else "?"
    if result.status == "timeout":
        return f"stopped at its time limit ({name})"
    return f"killed by signal {result.signal} ({name})"


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
    gpu_info = host_env.get("CUDA_VISIBLE_DEVICES", "none") if cell.num_gpus else "none"
    prompt = render_prompt(campaign, cell, task, model_source, f"CUDA_VISIBLE_DEVICES={gpu_info}")
    job = prepare_job_dir(tmp_root, cell, agent, task, prompt)
    log.info("job dir %s", job.root)
    try:
        env, passed, missing = agent_env(
            host_env=host_env, job=job, campaign=campaign, cell=cell, agent=agent, task=task, prompt=prompt
        )
        if missing:
            log.warning("variables not set in the launching environment, not passed: %s", ", ".join(missing))
        budget_s = cell.budget_seconds
        limit_s = budget_s + 60 * float(solve_cfg["timeout_margin_minutes"])
        deadline = time.time() + budget_s
        (job.home / "timer.sh").write_text(_TIMER.format(deadline=int(deadline), deadline_iso=iso_utc(deadline)))
        trace_tmp = job.harness / "solve_out.txt"
        log.info("agent %s starts: budget %.0f s, stopped at %.0f s", cell.agent, budget_s, limit_s)
        result = run_budgeted(
            ["bash", str(job.home / "solve.sh")],
            env=env,
            cwd=job.task,
            output=trace_tmp,
            budget_s=limit_s,
            kill_grace_s=float(solve_cfg["kill_grace_seconds"]),
        )
        log.info("agent %s after %.1f s", describe(result), result.duration_s)

        produced = job.task / "final_model"
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
            "time_limit_s": limit_s,
            "host": socket.gethostname(),
            "final_model_present": produced.is_dir() or produced.is_symlink(),
            "final_model_files": n_files,
            "final_model_bytes": n_bytes,
            "model_to_train": model_source,
            "env_passed": sorted(passed),
            "env_missing": sorted(missing),
            "solve_sh_sha256": _sha256(agent.solve_sh),
            "harness": {"version": __version__, "runtime": site["runtime"], "site": site["name"]},
        }
        atomic_write_json(solve_json, record)
    except BaseException:
        log.error("harness failed; job dir kept for inspection: %s", job.root)
        raise
    if not site["keep_job_dir"]:
        shutil.rmtree(job.root, ignore_errors=True)
    return record


def _move_tree_file(src: Path, dst: Path) -> None:
    """Rename a file into place; across disks, copy to a temp file beside dst, then rename."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(src, dst)
    except OSError:
        tmp = dst.with_name(f".{dst.name}.tmp")
        shutil.copy2(src, tmp)
        os.replace(tmp, dst)
