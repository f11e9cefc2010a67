"""The judge stage of one cell: gather the evidence, run the deterministic checks, ask the
judges (PostTrainBench v1.2's: contamination ``judge.contamination_runs`` times, API usage,
PTB lookup, general anomaly; the logic: ``ptb_harness.judging``), write judgement.json
with every verdict and every run.

Fails closed: whatever goes wrong (an input that cannot be read, a test set that cannot
be loaded, the judge model's error, timeout or unparsable answer), the verdicts without
an answer are ``judge_failed``, which counts as flagged. The job itself succeeds once
judgement.json is written; delete the file to judge the cell again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptb_harness.campaign.agents import allowed_env_names
from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.scoring import base_config_json, model_config_json, read_model_config
from ptb_harness.campaign.tasks import TaskSpec
from ptb_harness.core.cell_files import (
    AGENT_FILES,
    AGENT_FILES_RECORD,
    EVIDENCE,
    LLM_LOG,
    SOLVE,
    AgentFilesRecord,
    SolveRecord,
)
from ptb_harness.core.records import atomic_write_json, read_json_dict
from ptb_harness.judging.checks import model_identity
from ptb_harness.judging.evidence_signals import lookup_signals, ngram_signal
from ptb_harness.judging.judges import CONTAMINATION, JUDGES, Judge
from ptb_harness.judging.prompt import DataBlock, TaskRules, evidence_blocks, evidence_message, signal_facts
from ptb_harness.judging.signals import Signal
from ptb_harness.judging.verdict import judged_run, verdict_fields
from ptb_harness.judging.vote import FieldVote, Run, resolve
from ptb_harness.runtime.procs import iso_utc
from ptb_harness.stages.judge_evidence import read_actions
from ptb_harness.traces.redact import Redactor, secrets_from_env
from ptb_scorer.llm_client import LLMClient, LLMUnavailable

log = logging.getLogger("ptb_harness.stages.judge")


class JudgeInputError(Exception):
    """An input of the judge could not be read: the verdict is judge_failed."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _agent_files(cell_dir: Path) -> list[tuple[str, str]]:
    """(path, text) of each file the solve kept for the judges' prompt; an unreadable or
    over-bound record fails the judgement (never "no files")."""
    record = AgentFilesRecord.read(cell_dir / AGENT_FILES_RECORD)
    if record is None:
        raise JudgeInputError(f"{AGENT_FILES_RECORD} missing, unreadable or over its read bound")
    files = []
    for entry in record.saved or []:
        p = cell_dir / AGENT_FILES / str(entry.get("path", ""))
        try:
            files.append((str(entry["path"]), p.read_text(encoding="utf-8", errors="replace")))
        except (OSError, KeyError) as e:
            raise JudgeInputError(f"agent file {p}: cannot read ({e})") from None
    return files


@dataclass
class _Findings:
    """What the judge has found so far: the sha256 of each input read, the checks' reports
    and the deterministic results. Filled step by step, and kept in judgement.json when a
    later step fails."""

    inputs: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    #: the deterministic signals, by name (judging.signals)
    signals: dict[str, Signal] = field(default_factory=dict)
    #: judge name -> its runs and how they were resolved (judgement.json `judges`)
    judges: dict[str, Any] = field(default_factory=dict)
    #: final_model's config.json (None: missing or unreadable) and its text, for the prompt
    final_config: dict | None = None
    final_config_text: str = ""


@dataclass(frozen=True)
class _Evidence:
    """The agent's side of the cell: its sanitized transcript, its kept files, what the
    evidence recorder read of every file it wrote (evidence.json, None when missing or
    unreadable) and the tool calls its gateway's log holds (for the prompt)."""

    transcript: str
    files: list[tuple[str, str]]
    recorded: dict[str, Any] | None
    requests: str = ""


def run_judge(
    campaign: Campaign,
    cell: Cell,
    *,
    transcript: Path,
    final_model: Path,
    judgement_json: Path,
    host_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Judge one cell and write judgement.json (always, fail closed): gather the evidence,
    run the deterministic checks, ask the judge model, record. Returns the record."""
    host_env = dict(os.environ if host_env is None else host_env)
    endpoint = campaign.settings.judge.endpoint
    assert endpoint is not None, "the judge rule runs only with judge.enabled"
    record: dict[str, Any] = {"cell": cell.wildcards, "started_at": iso_utc(time.time())}
    record["judge"] = {"model": endpoint.model, "base_url": endpoint.base_url}
    found = _Findings()
    votes: dict[str, FieldVote] = {}
    failure = ""
    try:
        task = campaign.task(cell.task)
        evidence = _gather(task, transcript, judgement_json.parent, found)
        # deterministic checks first: facts for the judges, and flags whatever they say
        _contamination(campaign, evidence, found)
        _disallowed_model(campaign, cell, final_model, found)
        evidence = _lookups(transcript, judgement_json.parent, evidence, found)
        evidence = _kept_files(judgement_json.parent, evidence, found)
        votes = _ask_judges(campaign, cell, task, evidence, found, record, host_env)
    except (JudgeInputError, LLMUnavailable, OSError) as e:
        failure = f"{type(e).__name__}: {e}" if isinstance(e, OSError) else str(e)
    except Exception as e:  # fail closed: a bug here must not read as clean
        log.exception("judge failed unexpectedly")
        failure = f"harness error: {type(e).__name__}: {e}"
    return _write_record(record, found, votes, failure, judgement_json)


def _gather(task: TaskSpec, transcript: Path, cell_dir: Path, found: _Findings) -> _Evidence:
    """The task's rules (as hashed at load), the transcript and the evidence record."""
    found.inputs["info_json"] = task.info_sha256
    text = transcript.read_text(encoding="utf-8", errors="replace")
    found.inputs["transcript"] = _sha256(transcript.read_bytes())
    recorded = read_json_dict(cell_dir / EVIDENCE)
    found.inputs[EVIDENCE] = _sha256((cell_dir / EVIDENCE).read_bytes()) if recorded is not None else None
    return _Evidence(text, [], recorded)


def _kept_files(cell_dir: Path, evidence: _Evidence, found: _Findings) -> _Evidence:
    """The agent's files the solve kept for the judges' prompt (after the checks: a record
    that cannot be read fails the judges, and the checks' results stay recorded)."""
    files = _agent_files(cell_dir)
    found.inputs[AGENT_FILES] = {name: _sha256(t.encode()) for name, t in files}
    return dataclasses.replace(evidence, files=files)


def _contamination(campaign: Campaign, evidence: _Evidence, found: _Findings) -> None:
    """The n-gram check of every file the agent wrote, as the evidence recorder read them."""
    signal = ngram_signal(evidence.recorded, campaign.settings.judge.max_contaminated_samples)
    if evidence.recorded is not None:
        found.inputs["test_set"] = (evidence.recorded.get("test_set") or {}).get("sha256")
    _signal(found, signal)


def _signal(found: _Findings, signal: Signal) -> None:
    """A deterministic check's result, recorded (judgement.json `checks`) and for the verdict."""
    found.signals[signal.name] = signal
    found.checks[signal.name] = signal.to_dict()


def _lookups(transcript: Path, cell_dir: Path, evidence: _Evidence, found: _Findings) -> _Evidence:
    """PTB lookups and hosted-LLM API calls in the agent's tool calls (its trace and its
    gateway's log), with the files' mentions as evidence; the gateway's tool calls go to
    the judges' prompt too."""
    record = SolveRecord.read(cell_dir / SOLVE)
    expect_log = record is not None and record.llm is not None
    actions = read_actions(transcript, cell_dir / LLM_LOG, expect_log)
    for signal in lookup_signals(actions, evidence.recorded):
        _signal(found, signal)
    if actions.log_sha256:
        found.inputs[LLM_LOG] = actions.log_sha256
    return dataclasses.replace(evidence, requests=actions.requests_text())


def _disallowed_model(campaign: Campaign, cell: Cell, final_model: Path, found: _Findings) -> None:
    """final_model's config against the base model's and its instruct variants' (model identity)."""
    final_cfg_path = final_model / "config.json"
    found.final_config = read_json_dict(final_cfg_path)
    if found.final_config is not None:
        found.inputs["final_model_config"] = _sha256(final_cfg_path.read_bytes())
        found.final_config_text = final_cfg_path.read_text(errors="replace")
    else:
        found.inputs["final_model_config"] = None
    # the plan's reader (campaign.scoring): the snapshot huggingface_hub loads offline
    base_cfg = read_model_config(base_config_json(campaign, cell.model))
    found.inputs["base_model_config"] = _sha256(json.dumps(base_cfg, sort_keys=True).encode()) if base_cfg else None
    instruct = {}
    for ref in campaign.settings.judge.instruct_variants.get(cell.model, []):
        ref_cfg = read_model_config(model_config_json(campaign, ref))
        if ref_cfg is None:
            raise JudgeInputError(f"judge.instruct_variants.{cell.model}: no config.json for {ref} (prefetch it)")
        instruct[ref] = ref_cfg
    identity = model_identity(found.final_config, base_cfg, instruct)
    _signal(found, Signal("model_identity", identity["flagged"], summary=identity["justification"]))


def _ask_judges(
    campaign: Campaign,
    cell: Cell,
    task: TaskSpec,
    evidence: _Evidence,
    found: _Findings,
    record: dict[str, Any],
    host_env: Mapping[str, str],
) -> dict[str, FieldVote]:
    """Every judge reads the same evidence message (agent text in data blocks, redacted),
    the contamination judge ``judge.contamination_runs`` times; each judge's runs are
    recorded and resolved into votes per field. The call stats go into the record either way."""
    cfg = campaign.settings.judge
    message = _evidence_message(campaign, cell, task, evidence, found, host_env)
    plan = [(judge, n) for judge in JUDGES for n in range(1, _runs(cfg.contamination_runs, judge) + 1)]
    endpoint = cfg.endpoint
    assert endpoint is not None

    with LLMClient(endpoint, env=host_env) as client:

        def ask(item: tuple[Judge, int]) -> Run:
            judge, n = item
            messages = [{"role": "system", "content": judge.system_prompt()}, {"role": "user", "content": message}]
            try:
                return judged_run(n, client.chat(messages, max_tokens=2000), "", judge.fields)
            except LLMUnavailable as e:  # this run has no answer; the others still count
                return judged_run(n, None, str(e), judge.fields)

        try:
            runs = client.map(ask, plan)
        finally:
            record["judge"]["usage"] = client.call_stats()
    return _votes(plan, runs, cfg.contamination_quorum, found)


def _votes(plan: list[tuple[Judge, int]], runs: list[Run], quorum: int, found: _Findings) -> dict[str, FieldVote]:
    """Each judge's runs resolved per field (the contamination judge by the quorum, the
    others alone), and recorded."""
    votes: dict[str, FieldVote] = {}
    for judge in JUDGES:
        mine = [run for (j, _), run in zip(plan, runs, strict=True) if j is judge]
        needed = quorum if judge is CONTAMINATION else 1
        resolved = resolve(mine, judge.fields, needed)
        votes.update(resolved)
        found.judges[judge.name] = {
            "quorum": needed,
            "runs": [r.to_dict() for r in mine],
            "resolved": {f: v.resolved_by for f, v in resolved.items()},
        }
    return votes


def _evidence_message(
    campaign: Campaign,
    cell: Cell,
    task: TaskSpec,
    evidence: _Evidence,
    found: _Findings,
    host_env: Mapping[str, str],
) -> str:
    """The one message every judge reads: the checks' facts, and every agent text in a data
    block, redacted of the cell's secrets and the graders' keys; its sha256 is an input."""
    cfg = campaign.settings.judge
    names = [*allowed_env_names(campaign.agent(cell.agent), task.required_api_keys)]
    redact = Redactor(secrets_from_env([*names, *campaign.settings.grader_key_names], host_env))
    signals = list(found.signals.values())
    blocks = evidence_blocks(
        signals=signals,
        final_config=found.final_config_text,
        transcript=evidence.transcript,
        files=evidence.files,
        requests=evidence.requests,
        max_chars=cfg.max_prompt_chars,
    )

    def clean(text: str) -> str:
        return redact(text.encode()).decode("utf-8", "replace")

    blocks = [DataBlock(b.label, clean(b.text), clean(b.name)) for b in blocks]
    entry = campaign.agent_entries[cell.agent]
    rules = TaskRules(task.name, task.judge.allowed_data, task.judge.disallowed_data, entry.dir, entry.model)
    message = evidence_message(rules, signal_facts(signals), blocks)
    found.inputs["prompt"] = _sha256(message.encode())
    return message


def _runs(contamination_runs: int, judge: Judge) -> int:
    """How often a judge is asked: the contamination judge as configured, the others once (as upstream)."""
    return contamination_runs if judge is CONTAMINATION else 1


def _write_record(
    record: dict[str, Any], found: _Findings, votes: Mapping[str, FieldVote], failure: str, judgement_json: Path
) -> dict[str, Any]:
    """judgement.json: each verdict from the checks' signals and the judges' votes, every
    judge's runs, and what it read."""
    record.update(verdict_fields(found.signals.values(), votes, failure))
    record["judges"] = found.judges
    record["checks"] = found.checks
    record["inputs"] = found.inputs
    unanswered = sorted({f"{v.field}: {v.resolved_by}" for v in votes.values() if v.flagged is None})
    if failure or unanswered:
        record["judge"]["error"] = failure or "; ".join(unanswered)[:2000]
    record["ended_at"] = iso_utc(time.time())
    atomic_write_json(judgement_json, record)
    log.info("verdict %s%s", record["verdict"], f" ({', '.join(record['flags'])})" if record["flags"] else "")
    return record
