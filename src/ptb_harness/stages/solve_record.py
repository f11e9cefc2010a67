"""solve.json: how the agent ended, what it left, and what ran it."""

from __future__ import annotations

import signal
import socket

from ptb_harness import __version__
from ptb_harness.runtime.delivery import Delivery
from ptb_harness.runtime.procs import ProcessResult, describe, iso_utc
from ptb_harness.runtime.sandbox import Launch
from ptb_harness.runtime.scheduler import scheduler_job
from ptb_harness.runtime.snapshot import provenance
from ptb_harness.stages.attempts import earlier_attempts
from ptb_harness.stages.solve_run import SolveRun


def budget_refused(llm: dict | None) -> bool:
    """Whether the gateway refused a model call because the cell's LLM budget was spent:
    its own record (``refused.llm_budget``), whatever the CLI did next."""
    refused = llm.get("refused") if llm is not None else None
    return isinstance(refused, dict) and isinstance(refused.get("llm_budget"), int) and refused["llm_budget"] > 0


def end_of(result: ProcessResult, llm: dict | None) -> tuple[str, str]:
    """(status, description) of how the agent ended: once its gateway refused a call at
    its LLM budget, the session is ``llm_budget_exhausted`` (its model is scored, as after
    a timeout) however the CLI then ended: stopped by the harness, or exiting (with any
    code) or crashing first, which a CLI that treats the refusal as fatal does before the
    harness's stop lands (Codex exits 1 on insufficient_quota). A time limit reached first
    stays ``timeout``."""
    if result.status != "timeout" and llm is not None and budget_refused(llm):
        if result.status == "stopped":
            how = signal.Signals(result.signal).name if result.signal else "?"
        else:
            how = f"after the refusal, the CLI {describe(result).replace('killed', 'was killed')}"
        return "llm_budget_exhausted", f"stopped at its LLM budget ({llm.get('exhausted')}; {how})"
    return result.status, describe(result)


def solve_record(
    run: SolveRun,
    result: ProcessResult,
    launch: Launch,
    resumes: list[dict],
    delivered: Delivery,
    llm: dict | None = None,
    limits: dict | None = None,
    files_problem: str | None = None,
    after_agent_s: float | None = None,
) -> dict:
    """The solve record of one try: ``result`` is how the agent ended over all its turns,
    ``launch`` its first launch, ``delivered`` what of final_model/ reached the cell dir,
    ``llm`` the LLM gateway's meter (None: the agent has no gateway), ``limits`` what its
    caps held (runtime.caps), ``files_problem`` why its own files were refused,
    ``after_agent_s`` the harness's time after the agent's clock stopped."""
    cell, site = run.cell, run.campaign.settings.site
    status, description = end_of(result, llm)
    record = {
        "cell": cell.wildcards,
        "status": status,
        "exit_code": result.exit_code,
        "signal": result.signal,
        "description": description,
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
        "agent_problem": delivered.problem or files_problem,
        # the caps, the cell's cgroup (or why it had none), what it counted, the rlimits
        "limits": limits,
        # seconds from the agent's end to this record: its leftovers stopped, its cgroup
        # removed, final_model, the trace and its own files delivered (off its clock)
        "delivery_s": round(after_agent_s, 3) if after_agent_s is not None else None,
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
    if llm is not None:
        record["llm"] = llm
    return record
