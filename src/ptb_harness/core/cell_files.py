"""A cell's files: every name below a cell dir, the order its records are shown in, and
its JSON records as typed, frozen objects. The one owner of a cell's contract: writers
and readers name files and keys through this module, never as string literals
(``tests/test_cell_files.py`` greps src/ and workflow/ for them).

A record's ``from_dict`` is tolerant, on purpose: records written by an older harness
(fewer keys) read with the missing fields at their defaults; keys this harness does not
know (written by a newer one, or added by hand) are kept in ``extra`` and written back by
``to_dict``, so a read-modify-write (solve.attempts.json) never drops them; values are
taken as written (the harness wrote them; a reader that decides on one checks it, as
``results.outcome`` does), and no JSON object makes it raise. ``read`` is bounded and
link-safe (``core.records.read_json_dict``), ``write`` atomic.

To add a record key: a field on its class (``optional()`` when it is written only
sometimes, so a record that lacks it stays as it was). To add a file: a name here, in
``RECORDS`` when it is a record a reader shows, and a row in the cell table of docs/results.md.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ptb_harness.core.records import atomic_write_json, read_json_dict

# -- names below a cell dir ------------------------------------------------------------------

#: solve: what the agent did
SOLVE = "solve.json"
#: solve: the agent's merged, timestamped output
RAW_TRACE = "solve_out.txt"
#: solve: the trace while the agent runs (beside the results, out of the agent's reach)
PARTIAL_TRACE = ".solve_out.txt.partial"
#: solve: the model the agent left (a directory); also its name in the agent's working dir
FINAL_MODEL = "final_model"
#: solve: every try of the cell (no rule's output, so Snakemake never deletes it)
ATTEMPTS = "solve.attempts.json"
#: solve, GPU cells: the CUDA preflight's verdict
PREFLIGHT = "preflight.json"
#: solve: the agent's own files kept for the judge (a directory), and their record
AGENT_FILES = "agent_files"
AGENT_FILES_RECORD = "agent_files.json"
#: solve: what the evidence recorder read of every file the agent wrote (the judge's
#: deterministic checks' input), and its index of every file version read
EVIDENCE = "evidence.json"
EVIDENCE_INDEX = "evidence_index.jsonl.gz"
#: solve: the recorder's own configuration (no secret in it)
EVIDENCE_CONFIG = ".evidence_recorder.json"
#: parse_trace: the readable transcript, its sanitized copy and the raw trace's
TRANSCRIPT = "solve_parsed.txt"
TRANSCRIPT_SANITIZED = "solve_parsed_sanitized.txt"
RAW_TRACE_SANITIZED = "solve_out_sanitized.txt"
#: parse_trace: the agent's token use, from the trace
USAGE = "usage.json"
#: evaluate: the scorer's result, present only once complete and valid
METRICS = "metrics.json"
#: evaluate: every scoring attempt, and whether it vouches for metrics.json
EVALUATE = "evaluate.json"
#: evaluate: each run's attempt logs, under <UTC start>/attempt-<k>.log (a directory)
EVALUATE_LOGS = "evaluate"
#: evaluate: what ran the cell (code, config, images, hosts, GPUs, scorer packages)
PROVENANCE = "provenance.json"
#: judge: the verdict
JUDGEMENT = "judgement.json"
#: by hand, after a review: verdicts that win over the judges' (who, why, which verdicts)
JUDGEMENT_OVERRIDE = "judgement_override.json"
#: solve and evaluate, GPU cells: the GPU samples, and `ptb-harness plot-cell`'s figure
GPU_MONITOR = "gpu_monitor.csv"
GPU_PLOT = "gpu_monitor.png"
#: every rule: the harness's own log of the cell (logs/<stage>.log)
LOGS = "logs"
#: solve: the LLM gateway's request log (one JSON line per request; not a rule's output,
#: so a failed solve keeps it), an earlier attempt's (LLM_LOG_OF), and the gateway's own log
LLM_LOG = "llm_log.jsonl"
GATEWAY_LOG = f"{LOGS}/llm_gateway.log"


def llm_log_of(attempt: str) -> str:
    """An earlier attempt's llm_log.jsonl, moved aside when a new attempt starts."""
    return f"llm_log.attempt-{attempt}.jsonl"


def is_llm_log(name: str) -> bool:
    """Whether a cell dir's entry is a request log: this attempt's or an earlier one's."""
    head, _, tail = llm_log_of("*").partition("*")
    return name == LLM_LOG or (name.startswith(head) and name.endswith(tail) and len(name) > len(head + tail))


#: the stages that write into a cell dir, in the order they run
STAGES = ("solve", "parse_trace", "evaluate", "judge")


def state_file(stage: str) -> str:
    """The stage's state record (running, done, failed, interrupted): <stage>.state.json."""
    return f"{stage}.state.json"


def lock_file(stage: str) -> str:
    """The lock that keeps one process per cell and stage."""
    return f".{stage}.lock"


def stage_log(stage: str) -> str:
    """The stage's log, below the cell dir."""
    return f"{LOGS}/{stage}.log"


#: the stages whose Snakemake job is benchmarked (wall, CPU, max RSS; see stage_benchmark)
BENCHMARKED_STAGES = ("solve", "evaluate", "judge")


def stage_benchmark(stage: str) -> str:
    """Snakemake's benchmark of the stage's job (the rule's ``benchmark:``, a TSV: wall
    seconds, max RSS in MB, CPU seconds, ...): <stage>.benchmark.tsv."""
    return f"{stage}.benchmark.tsv"


def attempt_log(k: int) -> str:
    """The log of evaluate attempt k, in its run's dir below EVALUATE_LOGS."""
    return f"attempt-{k}.log"


SOLVE_STATE = state_file("solve")
EVALUATE_STATE = state_file("evaluate")

#: the cell's JSON records, in the order a reader shows them (the viewer's cell page)
RECORDS = (
    SOLVE, EVALUATE, METRICS, USAGE, JUDGEMENT_OVERRIDE, JUDGEMENT, PREFLIGHT, SOLVE_STATE, EVALUATE_STATE, PROVENANCE
)  # fmt: skip
#: the records a reader opens a cell for (shown unfolded)
OPEN_RECORDS = frozenset({SOLVE, EVALUATE, METRICS, JUDGEMENT, JUDGEMENT_OVERRIDE})
#: the records a cell's outcome is decided from (results.outcome; the judge's flag reads JUDGEMENT)
OUTCOME_RECORDS = (METRICS, SOLVE, EVALUATE, PREFLIGHT, SOLVE_STATE, EVALUATE_STATE)


#: every fixed name of a cell's files (and, per stage, its state record, lock and log):
#: what no other module writes as a literal
FILE_NAMES = frozenset(
    {
        SOLVE, RAW_TRACE, PARTIAL_TRACE, FINAL_MODEL, ATTEMPTS, PREFLIGHT, AGENT_FILES, AGENT_FILES_RECORD,
        EVIDENCE, EVIDENCE_INDEX, EVIDENCE_CONFIG,
        TRANSCRIPT, TRANSCRIPT_SANITIZED, RAW_TRACE_SANITIZED, USAGE, METRICS, EVALUATE, PROVENANCE,
        JUDGEMENT, JUDGEMENT_OVERRIDE, GPU_MONITOR, GPU_PLOT, LLM_LOG, GATEWAY_LOG,
        *(f(s) for s in STAGES for f in (state_file, lock_file, stage_log)),
        *(stage_benchmark(s) for s in BENCHMARKED_STAGES),
    }
)  # fmt: skip


# -- typed records -----------------------------------------------------------------------------

R = TypeVar("R", bound="Record")


@functools.cache
def _shape(cls: type[Record]) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...]]:
    """A record class's fields: their plain defaults, and the factories of the others."""
    fields = [f for f in dataclasses.fields(cls) if f.name != "extra"]
    plain = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    factories = tuple((f.name, f.default_factory) for f in fields if f.default is dataclasses.MISSING)
    return plain | {name: None for name, _ in factories}, factories


def optional() -> Any:
    """A field written only when it has a value (None: the key stays out of the file)."""
    return field(default=None, metadata={"optional": True})


@dataclass(frozen=True, kw_only=True)
class Record:
    """A JSON record of a cell: known keys as fields, the rest in ``extra``."""

    #: the file's name below the cell dir ('' for records nested in another)
    FILE: ClassVar[str] = ""
    #: fields holding a list of nested records, by field name
    NESTED: ClassVar[Mapping[str, type[Record]]] = {}

    #: keys this version of the harness does not know, kept as written
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls: type[R], data: Any) -> R:
        """The record of a JSON object (anything else reads as an empty record)."""
        data = data if isinstance(data, Mapping) else {}
        defaults, factories = _shape(cls)
        values = {k: v for k, v in data.items() if k in defaults}
        extra = {k: v for k, v in data.items() if k not in defaults} if len(values) < len(data) else {}
        for name, nested in cls.NESTED.items():
            if isinstance(values.get(name), list):
                values[name] = tuple(nested.from_dict(item) for item in values[name])
        # set as the dataclass's __init__ would, without its per-field cost (status reads
        # a few records of each of 20,000 cells): every field has a default
        record = object.__new__(cls)
        fields = record.__dict__
        fields.update(defaults)
        fields.update((name, factory()) for name, factory in factories if name not in values)
        fields.update(values)
        fields["extra"] = extra
        return record

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.extra)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or (value is None and f.metadata.get("optional")):
                continue
            if f.name in self.NESTED and isinstance(value, tuple | list):
                value = [v.to_dict() if isinstance(v, Record) else v for v in value]
            out[f.name] = value
        return out

    @classmethod
    def read(cls: type[R], path: str | Path) -> R | None:
        """The record in a file; None when it is missing, unreadable, too big or not a JSON object."""
        data = read_json_dict(path)
        return None if data is None else cls.from_dict(data)

    def write(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_dict())

    def replace(self: R, **changes: Any) -> R:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, kw_only=True)
class StageState(Record):
    """<stage>.state.json: a stage `running` (host, pid and its start time, scheduler job),
    `done`, `failed` with the reason, or `interrupted` with the signal."""

    stage: str | None = None
    state: str | None = None
    host: str | None = None
    pid: int | None = None
    pid_start_ticks: int | None = None
    started_at: str | None = None
    scheduler: Mapping[str, str] | None = None
    log: str | None = None
    ended_at: str | None = optional()
    signal: int | None = optional()
    reason: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class SolveAttempt(Record):
    """One try of a cell, in solve.attempts.json."""

    n: int | None = None
    started_at: str | None = None
    host: str | None = None
    harness_pid: int | None = None
    harness_pid_start_ticks: int | None = None
    scheduler: Mapping[str, str] | None = None
    status: str | None = None
    job_dir: str | None = optional()
    agent_pid: int | None = optional()
    ended_at: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class SolveAttempts(Record):
    """solve.attempts.json: every try of the cell, in order."""

    FILE = ATTEMPTS
    NESTED = {"attempts": SolveAttempt}

    attempts: tuple[SolveAttempt, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Preflight(Record):
    """preflight.json: the CUDA preflight's verdict (`ok` or `failed`) and why."""

    FILE = PREFLIGHT

    status: str | None = None
    reason: str | None = None
    gpus: list[str] | None = None
    host: str | None = None


@dataclass(frozen=True, kw_only=True)
class SolveRecord(Record):
    """solve.json: how the agent ended, what it left, and what ran it."""

    FILE = SOLVE

    cell: Mapping[str, str] | None = None
    #: exited, timeout, signal, llm_budget_exhausted
    status: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    description: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    budget_s: float | None = None
    resumes: list[Mapping[str, Any]] | None = None
    time_limit_s: float | None = None
    host: str | None = None
    scheduler: Mapping[str, str] | None = None
    final_model_present: bool | None = None
    final_model_files: int | None = None
    final_model_bytes: int | None = None
    #: why what the agent left was refused (an agent outcome), None when it was not
    agent_problem: str | None = None
    model_to_train: str | None = None
    gpus: list[Mapping[str, Any]] | None = None
    gpu_source: str | None = None
    env_passed: list[str] | None = None
    sandbox_env_names: list[str] | None = None
    env_missing: list[str] | None = None
    solve_sh_sha256: str | None = None
    harness: Mapping[str, Any] | None = None
    #: the how-manyth try of this cell, and the earlier tries in which the agent ran
    attempt: int | None = None
    earlier_attempts: list[Mapping[str, Any]] | None = None
    #: the LLM gateway's meter (agents whose agent.json has "llm"): requests, tokens,
    #: cost_usd, statuses, refusals, latency, limits, exhausted (gateway.meter.Meter.summary)
    llm: Mapping[str, Any] | None = optional()
    #: the agent's caps, its cell's cgroup (or why it had none), what it counted (`hit`
    #: names a cap that was hit), the rlimits it got
    limits: Mapping[str, Any] | None = optional()
    #: seconds the harness took after the agent's clock stopped, up to this record
    delivery_s: float | None = optional()


@dataclass(frozen=True, kw_only=True)
class EvaluateAttempt(Record):
    """One run of evaluate.py, in evaluate.json."""

    attempt: int | None = None
    max_tokens: int | None = None
    evaluate_py_sha256: str | None = None
    #: the scorer's PTB_SCORER_INFO record
    scorer: Mapping[str, Any] | None = None
    model_invalid: bool | None = None
    process: str | None = None
    exit_code: int | None = None
    duration_s: float | None = None
    #: the attempt's log, relative to the cell dir
    log: str | None = None
    ok: bool | None = None
    problem: str | None = None
    #: with seeds (the final evaluation): the seeds this attempt ran, those it scored, why
    #: each other one did not, and how many times it loaded the model (PTB_MODEL_LOADED)
    seeds: tuple[int, ...] | None = optional()
    seeds_scored: tuple[int, ...] | None = optional()
    seeds_failed: Mapping[str, str] | None = optional()
    model_loads: int | None = optional()


@dataclass(frozen=True, kw_only=True)
class EvaluateRecord(Record):
    """evaluate.json: every scoring attempt; `status` scored (with the accuracy and the
    sha256 of the metrics.json it vouches for), failed, no_model, or running."""

    FILE = EVALUATE
    NESTED = {"attempts": EvaluateAttempt}

    cell: Mapping[str, str] | None = None
    started_at: str | None = None
    harness: Mapping[str, Any] | None = None
    attempts: tuple[EvaluateAttempt, ...] = ()
    #: the task dir that ran and the sha256 of its evaluate.py and of the whole dir
    scorer: Mapping[str, Any] | None = optional()
    status: str | None = optional()
    accuracy: float | None = optional()
    metrics_sha256: str | None = optional()
    reason: str | None = optional()
    ended_at: str | None = optional()
    #: the final evaluation's seeds: the policy, the campaign's seeds, the final model's
    #: temperature and whether it decodes greedily, the seeds evaluated and each one's outcome
    seeds: Mapping[str, Any] | None = optional()


#: usage.json's quantities, in order: UsageRecord's first fields, cells.csv's usage columns
#: (results.token_usage) and, but resumes (counted as sessions), what a trace's events add
#: up to (traces.token_usage)
USAGE_QUANTITIES = ("input_tokens", "output_tokens", "cached_tokens", "cost_usd", "turns", "tool_calls", "resumes")


@dataclass(frozen=True, kw_only=True)
class UsageRecord(Record):
    """usage.json: what the agent's session used. ``source`` ``gateway``: the tokens, cost
    and requests are the LLM gateway's meter (the provider's own answers), the trace's own
    figures are in ``agent_reported`` and a large difference in ``disagreement``;
    ``source`` ``trace`` (agents without a gateway): all from the trace (None: it does not say).
    Its first fields are USAGE_QUANTITIES (tests/unit/test_trace_usage.py checks)."""

    FILE = USAGE

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    turns: int | None = None
    tool_calls: int | None = None
    resumes: int | None = None
    format: str | None = None
    source: str | None = optional()
    requests: int | None = optional()
    agent_reported: Mapping[str, Any] | None = optional()
    disagreement: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class AgentFilesRecord(Record):
    """agent_files.json: the agent's files kept for the judge, and those left out and why."""

    FILE = AGENT_FILES_RECORD

    dir: str | None = None
    saved: list[Mapping[str, Any]] | None = None
    skipped: list[Mapping[str, Any]] | None = None
    bytes: int | None = None
    max_bytes: int | None = None
    redactions: Mapping[str, int] | None = None
    #: left-out files past the record's byte budget, only counted, by reason
    skipped_uncounted: Mapping[str, int] | None = optional()
    #: the most entries of the agent's own walked, and why the walk stopped (an agent outcome)
    max_files: int | None = optional()
    problem: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class Judgement(Record):
    """judgement.json: the verdict (clean, flagged, judge_failed), the flags, each
    verdict's result ({flagged, flagged_by, judge_failed, justification}), every judge's
    runs and how they were resolved, the deterministic checks, the judge model and the
    sha256 of every input."""

    FILE = JUDGEMENT

    cell: Mapping[str, str] | None = None
    started_at: str | None = None
    #: the judge model, its endpoint, its token use, and its error when it failed
    judge: Mapping[str, Any] | None = None
    verdict: str | None = None
    flags: list[str] | None = None
    contamination: Mapping[str, Any] | None = None
    disallowed_model: Mapping[str, Any] | None = None
    api_usage: Mapping[str, Any] | None = None
    #: the agent looked PostTrainBench itself up (absent in records of older harnesses)
    ptb_lookup: Mapping[str, Any] | None = optional()
    #: anything else amiss (recorded only, never counted)
    general_anomaly: Mapping[str, Any] | None = optional()
    #: judge name -> its runs (each answer or why there is none) and how they were resolved
    judges: Mapping[str, Any] | None = optional()
    checks: Mapping[str, Any] | None = None
    inputs: Mapping[str, Any] | None = None
    ended_at: str | None = None

    def check(self, name: str) -> Mapping[str, Any] | None:
        """One check's result ({flagged, flagged_by, justification}), None when absent
        (a check this harness does not know is read from ``extra``)."""
        part = self.to_dict().get(name)
        return part if isinstance(part, Mapping) else None


@dataclass(frozen=True, kw_only=True)
class JudgementOverride(Record):
    """judgement_override.json, written by hand after a review: `verdicts` (verdict name ->
    true/false) win over the judges' for this cell, and the tables show `by` and `reason`.
    E.g. ``{"by": "A. Reviewer", "reason": "the overlap is the train split", "at":
    "2026-12-01", "verdicts": {"contamination": false}}``."""

    FILE = JUDGEMENT_OVERRIDE

    #: who decided
    by: str | None = None
    #: why
    reason: str | None = None
    #: when (free text, e.g. a date)
    at: str | None = optional()
    verdicts: Mapping[str, Any] | None = None

    def problem(self, known: tuple[str, ...]) -> str:
        """Why the override cannot be applied ('' when it can): `by` and `reason` are
        needed, and `verdicts` naming only `known` verdicts, each true or false."""
        for key in ("by", "reason"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                return f"{JUDGEMENT_OVERRIDE}: `{key}` is missing (who decided, and why, are shown with the verdict)"
        if not isinstance(self.verdicts, Mapping) or not self.verdicts:
            return f"{JUDGEMENT_OVERRIDE}: `verdicts` must map verdict names ({', '.join(known)}) to true or false"
        for name, value in self.verdicts.items():
            if name not in known:
                return f"{JUDGEMENT_OVERRIDE}: verdicts.{str(name)[:40]}: not a verdict ({', '.join(known)})"
            if not isinstance(value, bool):
                return f"{JUDGEMENT_OVERRIDE}: verdicts.{name}: must be true or false"
        return ""
