"""What the agent leaves, moved out of its job dir: final_model/ and the trace into the
cell dir (the solve's outputs), then its own files, sanitized, for the judge."""

from __future__ import annotations

import logging
from pathlib import Path

from ptb_harness.core.cell_files import FINAL_MODEL
from ptb_harness.core.errors import HarnessError
from ptb_harness.core.secrets import secret_needles
from ptb_harness.runtime.delivery import Delivery, deliver_file, deliver_tree
from ptb_harness.stages.agent_files import save_agent_files
from ptb_harness.stages.job_dir import scratch_filled
from ptb_harness.stages.solve_run import SolveRun
from ptb_harness.traces.redact import Redactor, secrets_from_env

log = logging.getLogger("ptb_harness.stages.solve")


def deliver_outputs(run: SolveRun, final_model: Path, raw_trace: Path) -> Delivery:
    """Move the agent's final_model/ (an empty one when it left none or it was refused)
    and its trace into the cell dir. Nothing of the job dir is followed out of it: lstat
    only, links refused, the size capped, no file holding a secret's value."""
    site = run.campaign.settings.site
    scratch_full = scratch_filled(run.job.root)
    secrets = secrets_from_env(run.variables.pass_names, run.host_env)
    delivery = deliver_tree(
        run.job.task / FINAL_MODEL,
        final_model,
        label=FINAL_MODEL,
        max_bytes=site.final_model_max_bytes,
        max_files=site.final_model_max_files,
        needles=secret_needles(secrets),
        refuse=scratch_full,  # what it left may be cut short: not scored
    )
    if not delivery.present:
        log.warning("agent left no %s/ directory", FINAL_MODEL)
    if delivery.problem:
        log.warning("agent_failed: %s", delivery.problem)
    trace_problem = deliver_file(run.trace, raw_trace, "the trace")
    if trace_problem:
        raise HarnessError(f"{trace_problem} ({run.trace})")
    return delivery


def keep_agent_files(run: SolveRun) -> str | None:
    """The agent's files (no weights), sanitized, beside the cell for the judge. Returns
    the agent's problem when its job dir held more files than the harness walks (an
    agent outcome); otherwise a record, never a reason to fail the solve: the judge says
    when they are missing."""
    settings = run.campaign.settings
    site = settings.site
    try:
        secrets = secrets_from_env([*run.variables.pass_names, *settings.grader_key_names], run.host_env)
        kept = save_agent_files(
            run.job.home, run.task.dir, run.cell_dir, Redactor(secrets), site.agent_files_max_bytes,
            site.agent_files_max_files,
        )  # fmt: skip
        log.info(
            "agent files kept: %d (%d bytes), %d left out", len(kept["saved"]), kept["bytes"], len(kept["skipped"])
        )
    except Exception as e:  # the solve's outputs are written; keep them
        log.warning("agent files not kept: %s: %s", type(e).__name__, e)
        return None
    if kept["problem"]:
        log.warning("agent_failed: %s", kept["problem"])
    return kept["problem"]
