"""parse_trace of one cell: the raw timestamped trace -> the readable transcript, the
sanitized companions of both (every secret the cell could have seen redacted) and
usage.json. The rule's job (workflow/scripts/parse_trace.py) and `ptb-harness
parse-trace` both call ``run_parse_trace``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ptb_harness.campaign.agents import AgentSpec, allowed_env_names
from ptb_harness.core.cell_files import SolveRecord, UsageRecord
from ptb_harness.gateway.meter import usage_record
from ptb_harness.traces import TraceStats, parse_trace_file
from ptb_harness.traces.redact import secrets_from_env


def run_parse_trace(
    raw: Path,
    parsed: Path,
    *,
    agent: AgentSpec | None,
    required_api_keys: Sequence[str] = (),
    sanitized_raw: Path | None = None,
    sanitized_parsed: Path | None = None,
    usage: Path | None = None,
    solve_json: Path | None = None,
    raw_only: bool = False,
    env: Mapping[str, str] = os.environ,
) -> TraceStats:
    """Write the transcript (and the sanitized copies and usage.json where their paths are
    given). The secrets are the values in env of the agent's passthrough and API-key
    variables, the task's required keys and every secret-looking variable; an agent whose
    agent.json says its trace is raw is copied, not parsed, and one that names its trace's
    format is read in it (else the format is detected). With solve.json's LLM gateway
    meter, usage.json's tokens and cost are the gateway's."""
    names = allowed_env_names(agent, tuple(required_api_keys))
    trace_format = agent.trace_format if agent is not None else "auto"
    stats = parse_trace_file(
        raw,
        parsed,
        sanitized_raw=sanitized_raw,
        sanitized_parsed=sanitized_parsed,
        secrets=secrets_from_env(names, env),
        raw_only=raw_only or trace_format == "raw",
        declared=None if trace_format in ("auto", "raw") else trace_format,
    )
    if usage is not None:
        solve = SolveRecord.read(solve_json) if solve_json is not None else None
        UsageRecord.from_dict(usage_record(stats.usage, solve.llm if solve else None)).write(usage)
    return stats
