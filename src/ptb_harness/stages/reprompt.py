"""Reprompt: an agent entry with ``reprompt: true`` has its CLI's session resumed while
the CLI ends early and well and enough of the budget is left."""

from __future__ import annotations

import logging
import time

from ptb_harness.core.cell_files import FINAL_MODEL
from ptb_harness.runtime.procs import ProcessResult, iso_utc, utc_stamp
from ptb_harness.stages.solve_run import HfView, SolveRun

log = logging.getLogger("ptb_harness.stages.solve")


def should_resume(result: ProcessResult, left_s: float, min_left_s: float) -> bool:
    """Resume the CLI's session (reprompt) when it ended on its own, successfully, with
    at least min_left_s of the budget left. A failing CLI is not resumed: it would fail
    again at once, over and over, until the budget ran out."""
    return result.status == "exited" and result.exit_code == 0 and left_s >= min_left_s


def budget_spent(run: SolveRun) -> bool:
    """Whether the cell's gateway refused a call at its LLM budget: a CLI that ends well
    after the refusal (before the harness's stop landed) is not resumed. The gateway is
    synced first: its refusal is said before the CLI hears it, so it is heard by now."""
    if run.gateway is None:
        return False
    run.gateway.sync()
    return run.gateway.exhausted.is_set()


def resume_message(left_s: float) -> str:
    left = max(0, int(left_s))
    return (
        f"You still have {left // 3600}h {left % 3600 // 60}m remaining of your time budget. "
        f"Continue working on the task: improve the model further and make sure {FINAL_MODEL}/ holds your best model."
    )


def resume_while_asked(run: SolveRun, hf_view: HfView, result: ProcessResult) -> tuple[ProcessResult, list[dict]]:
    """While the entry asks for it and the CLI ended early and well, resume its session
    with the time left. Returns how the last turn ended (from the first's start) and the
    resumes (solve.json's ``resumes``)."""
    entry = run.campaign.agent_entries.get(run.cell.agent)
    resumes: list[dict] = []
    deadline = run.started + run.budget_s
    min_left_s = 60 * float(run.campaign.settings.solve.reprompt_min_minutes)
    while (
        entry is not None
        and entry.reprompt
        and should_resume(result, deadline - time.time(), min_left_s)
        and not budget_spent(run)
    ):
        left = deadline - time.time()
        turn, resumed = _resume_once(run, hf_view, len(resumes) + 1, left)
        resumes.append(resumed)
        result = ProcessResult(turn.status, turn.exit_code, turn.signal, result.started_at, turn.ended_at)
    return result, resumes


def _resume_once(run: SolveRun, hf_view: HfView, n: int, left: float) -> tuple[ProcessResult, dict]:
    """The n-th resumed turn: a marker in the trace, then the CLI with PTB_RESUME set."""
    message = resume_message(left)
    log.info("agent ended with %.0f s left: resume %d of its session", left, n)
    with open(run.trace, "ab") as f:  # a marker between the turns, in the trace
        f.write(f"[{utc_stamp()}] ptb-harness: resume {n}: {message}\n".encode())
    resume_env = {"PTB_RESUME": str(n), "PTB_RESUME_MESSAGE": message}
    # a resumed turn is stopped at the first turn's hard limit
    left_to_limit = max(0.0, run.started + run.limit_s - time.time())
    turn = run.run_agent(run.launch(hf_view, extra_env=resume_env), left_to_limit, append=True)
    return turn, {
        "started_at": iso_utc(turn.started_at),
        "time_left_s": round(left, 1),
        "message": message,
        "status": turn.status,
        "exit_code": turn.exit_code,
        "duration_s": round(turn.duration_s, 3),
    }
