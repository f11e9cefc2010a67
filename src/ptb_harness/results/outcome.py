"""The outcome of a cell, decided by one function from the cell's records (no Snakemake DAG).

Every cell has exactly one outcome:

- `scored`: a valid metrics.json that the records vouch for: solve.json exists and
  evaluate.json says `scored` and names that file's sha256 and accuracy. Anything else
  beside a metrics.json (a file written by the agent, by hand, or by an older harness) is
  `infra_failed: records disagree (tampered or edited by hand)`.
- `agent_failed`: the agent ran and left no usable model: no final model, or a scorer
  that failed because of the model (it could not be loaded: missing config or weights,
  an unknown architecture, a broken safetensors file; or evaluate.py said so with a
  line starting `PTB_MODEL_INVALID:`).
- `infra_failed`: the harness or the machine failed: the CUDA preflight refused, a stage
  failed in the harness, a job died without a record (node failure, SIGKILL, walltime),
  the scorer failed for reasons outside the model, or metrics.json is corrupt.
- `running`: a stage is in progress (its process is alive, or its scheduler job is).
- `pending`: not run yet, or solved and waiting for its score.

The evidence (a short quote of the record that decided) goes with it into every table.
"""

from __future__ import annotations

import hashlib
import os
import resource
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ptb_harness.core.cell_files import (
    EVALUATE,
    EVALUATE_STATE,
    JUDGEMENT,
    JUDGEMENT_OVERRIDE,
    METRICS,
    PREFLIGHT,
    SOLVE,
    SOLVE_STATE,
    EvaluateRecord,
    Preflight,
    Record,
    SolveRecord,
    StageState,
)
from ptb_harness.core.records import MAX_METRICS_BYTES, check_metrics, read_json_dict, read_record_bytes
from ptb_harness.runtime.procs import process_start_ticks
from ptb_scorer.protocol import model_fault, read_attempt_log

T = TypeVar("T")
R = TypeVar("R", bound=Record)

OUTCOMES = ("scored", "agent_failed", "infra_failed", "pending", "running")
#: Each outcome's mark in the status grid and the viewer's (in the order their legends list them).
MARKS = {"scored": "S", "agent_failed": "A", "infra_failed": "I", "running": "R", "pending": "."}
#: A scored cell the judge flagged (its own mark: its score does not count as the agent's).
FLAGGED_MARK = "F"


def marks_legend(flagged: bool = False) -> str:
    """'S scored, A agent_failed, ...' (with the flagged mark after S when asked)."""
    marks = [f"{mark} {outcome}" for outcome, mark in MARKS.items()]
    if flagged:
        marks.insert(1, f"{FLAGGED_MARK} scored but flagged by the judge")
    return ", ".join(marks)


@dataclass(frozen=True)
class CellRecords:
    """A cell's records as read (a record given as a mapping is read as its typed record)."""

    solve: SolveRecord | None = None
    evaluate: EvaluateRecord | None = None
    metrics: dict | None = None
    metrics_problem: str | None = None
    #: sha256 of metrics.json's bytes, when it was read
    metrics_sha256: str | None = None
    #: solve.json is in the cell's listing (the fast path lists it without reading it)
    solve_listed: bool = False
    preflight: Preflight | None = None
    solve_state: StageState | None = None
    evaluate_state: StageState | None = None
    #: the end of each failed evaluate attempt's log, keyed by attempt number
    attempt_log_tails: dict[int, str] | None = None
    #: the names in the cell dir when it was listed (None: not listed)
    files: frozenset[str] | None = None
    #: the judge's judgement.json and a reviewer's judgement_override.json (not part of
    #: the outcome: results.flags reads them)
    judgement: dict | None = None
    judgement_override: dict | None = None

    def __post_init__(self) -> None:
        for name, cls in _TYPED.items():
            value = getattr(self, name)
            if isinstance(value, Mapping):
                object.__setattr__(self, name, cls.from_dict(value))


_TYPED: dict[str, type[Record]] = {
    "solve": SolveRecord,
    "evaluate": EvaluateRecord,
    "preflight": Preflight,
    "solve_state": StageState,
    "evaluate_state": StageState,
}


def _read_metrics(cell_dir: str | Path) -> tuple[dict | None, str | None, str | None]:
    """(valid metrics, None, sha256), (None, what is wrong, sha256), or (None, None, None)
    when there is none."""
    data, why = read_record_bytes(os.path.join(cell_dir, METRICS), MAX_METRICS_BYTES)
    if data is None:  # missing (no score), or not a file one may read
        return None, why or None, None
    metrics, problem = check_metrics(data)
    return metrics, problem or None, hashlib.sha256(data).hexdigest()


def read_cell(cell_dir: str | Path, present: frozenset[str] | set[str] | None = None) -> CellRecords:
    """The cell's records. `present`, when given, names the files known to exist (one
    directory listing instead of a failed open per missing file)."""

    def load(name: str, cls: type[R]) -> R | None:
        if present is not None and name not in present:
            return None
        return cls.read(os.path.join(cell_dir, name))

    def load_raw(name: str) -> dict | None:
        if present is not None and name not in present:
            return None
        return read_json_dict(os.path.join(cell_dir, name))

    metrics, problem, digest = _read_metrics(cell_dir) if present is None or METRICS in present else (None, None, None)
    evaluate = load(EVALUATE, EvaluateRecord)
    tails = None
    if evaluate is not None and evaluate.status == "failed":
        attempts = evaluate.attempts if isinstance(evaluate.attempts, tuple) else ()
        tails = {
            k: read_attempt_log(os.path.join(cell_dir, att.log), head_bytes=0).tail
            for k, att in enumerate(attempts, 1)
            if not att.ok and isinstance(att.log, str)
        }
    return CellRecords(
        solve=load(SOLVE, SolveRecord),
        evaluate=evaluate,
        metrics=metrics,
        metrics_problem=problem,
        metrics_sha256=digest,
        preflight=load(PREFLIGHT, Preflight),
        solve_state=load(SOLVE_STATE, StageState),
        evaluate_state=load(EVALUATE_STATE, StageState),
        attempt_log_tails=tails,
        files=frozenset(present) if present is not None else None,
        judgement=load_raw(JUDGEMENT),
        judgement_override=load_raw(JUDGEMENT_OVERRIDE),
    )


#: Whether the process or job of a `running` state record still lives: True, False, or
#: None when that cannot be known from here.
Liveness = Callable[[StageState], bool | None]


def local_liveness(slurm_jobs: Callable[[], set[str] | None] = lambda: None) -> Liveness:
    """Liveness from this host's /proc (same host: the pid and its start time) and, for
    records of Slurm jobs, the job ids Slurm still has (`slurm_jobs`, asked at most once,
    and only when a record names a Slurm job)."""
    here = socket.gethostname()
    asked: list[set[str] | None] = []
    once = threading.Lock()  # cells are read by several threads

    def alive(state: StageState) -> bool | None:
        job = _scheduler(state).get("SLURM_JOB_ID")
        if job:
            with once:
                if not asked:
                    asked.append(slurm_jobs())
            if asked[0] is not None:
                return str(job) in asked[0]
        if state.host == here and isinstance(state.pid, int):
            ticks = process_start_ticks(state.pid)
            return ticks is not None and ticks == state.pid_start_ticks
        return None

    return alive


def _or(value: Any, absent: str = "?") -> Any:
    """A record's value, or what a reader shows for one that is not there."""
    return absent if value is None else value


def _scheduler(state: StageState) -> Mapping[str, Any]:
    return state.scheduler if isinstance(state.scheduler, Mapping) else {}


def _where(state: StageState) -> str:
    job = _scheduler(state)
    jid = job.get("SLURM_JOB_ID") or job.get("condor_ClusterId")
    return f"on {_or(state.host)} (pid {_or(state.pid)}{f', job {jid}' if jid else ''})"


def _running(state: StageState | None, alive: Liveness) -> tuple[bool, str] | None:
    """For a `running` state record: (still alive?, how it reads); None for other states."""
    if state is None or state.state != "running":
        return None
    live = alive(state)
    since = f"since {_or(state.started_at)} {_where(state)}"
    stage = _or(state.stage, "stage")
    if live is False:
        return False, f"{stage} died without a record {since}: node failure, kill or walltime"
    return True, f"{stage} running {since}" + ("" if live else " (not verifiable from here)")


def _interrupted(state: StageState) -> str:
    return (
        f"{_or(state.stage, 'stage')} interrupted (signal {_or(state.signal)}) at "
        f"{_or(state.ended_at)} {_where(state)}; a rerun redoes it"
    )


def _model_fault(rec: CellRecords) -> str | None:
    """The scorer's words when every failed attempt failed because of the model."""
    tails = rec.attempt_log_tails or {}
    if not tails:
        return None
    found = []
    for tail in tails.values():
        fault = model_fault(tail)  # the last in the tail: the error the attempt died of
        if fault is None:
            return None
        found.append(fault)
    return found[-1]


def records_disagree(rec: CellRecords) -> str | None:
    """Why the records do not vouch for metrics.json (None when they do). Only the
    evaluate stage writes metrics.json, and it names the file's hash in evaluate.json."""
    if rec.solve is None and not rec.solve_listed:
        return f"{METRICS} without {SOLVE}"
    ev = rec.evaluate
    if ev is None:
        return f"{METRICS} without {EVALUATE}"
    if ev.status != "scored":
        return f"{METRICS}, but {EVALUATE} says {str(ev.status)[:40]}"
    if ev.metrics_sha256 != rec.metrics_sha256:
        return f"{METRICS} is not the file the evaluate stage wrote (sha256 differs)"
    acc = (rec.metrics or {}).get("accuracy")
    if ev.accuracy != acc:
        return f"{METRICS} says accuracy {acc}, {EVALUATE} {str(ev.accuracy)[:40]}"
    return None


#: The start of the evidence of a cell whose records disagree.
DISAGREE = "records disagree (tampered or edited by hand)"


def classify(rec: CellRecords, alive: Liveness = lambda state: None) -> tuple[str, str]:
    """(outcome, evidence): one of OUTCOMES and a short quote of the record that decided it."""
    if rec.metrics is not None:
        why = records_disagree(rec)
        if why:
            return "infra_failed", f"{DISAGREE}: {why}"
        return "scored", f"accuracy {rec.metrics['accuracy']}"
    if rec.metrics_problem:
        return "infra_failed", f"{METRICS} is invalid: {rec.metrics_problem}"
    evaluating = _running(rec.evaluate_state, alive)
    if evaluating and evaluating[0]:
        return "running", evaluating[1]
    if rec.solve is None:
        return _unsolved(rec, alive)
    return _solved(rec, evaluating)


def _unsolved(rec: CellRecords, alive: Liveness) -> tuple[str, str]:
    """A cell without solve.json: its solve runs, died, failed in the harness, or never ran."""
    solving = _running(rec.solve_state, alive)
    if solving and solving[0]:
        return "running", solving[1]
    if rec.preflight is not None and rec.preflight.status == "failed":
        return "infra_failed", f"CUDA preflight failed, agent not started: {_or(rec.preflight.reason)}"
    if solving:
        return "infra_failed", solving[1]
    state = rec.solve_state
    if state is not None and state.state == "failed":
        return "infra_failed", f"solve failed in the harness: {_or(state.reason)}"
    if state is not None and state.state == "interrupted":
        return "infra_failed", _interrupted(state)
    return "pending", "not solved yet"


def _cap_hit(solve: SolveRecord) -> str | None:
    """'the agent hit its memory cap (...)' as solve.json's limits say (from the cell's
    cgroup events), None when no cap was hit or the record predates caps."""
    limits = solve.limits
    hit = limits.get("hit") if isinstance(limits, Mapping) else None
    return hit[:200] if isinstance(hit, str) and hit else None


def _solved(rec: CellRecords, evaluating: tuple[bool, str] | None) -> tuple[str, str]:
    """A solved cell without a score: what its model and its scoring say."""
    solve = rec.solve
    agent = f"agent {_or(solve.description)}"
    cap = _cap_hit(solve)
    if cap:  # the cap it hit is the first thing an agent that failed is told
        agent = f"{agent}; {cap}"
    if solve.agent_problem:
        return "agent_failed", f"{agent}; {str(solve.agent_problem)[:300]}"
    if not solve.final_model_files:
        return "agent_failed", f"{agent}; no final model"
    ev = rec.evaluate or EvaluateRecord()
    if ev.status == "no_model":
        return "agent_failed", f"{agent}; {_or(ev.reason, 'no final model')}"
    if ev.status == "failed":
        fault = _model_fault(rec)
        if fault:
            return "agent_failed", f"{agent}; the model cannot be scored: {fault}"
        return "infra_failed", f"scorer: {_or(ev.reason)}"
    if evaluating:  # a running record whose process is gone
        return "infra_failed", evaluating[1]
    state = rec.evaluate_state
    if state is not None and state.state == "interrupted":
        return "infra_failed", _interrupted(state)
    if state is not None and state.state == "failed":
        return "infra_failed", f"evaluate failed in the harness: {_or(state.reason)}"
    return "pending", f"solved ({agent}); not scored yet"


def final_from_records(rec: CellRecords) -> bool:
    """Whether the records alone decided an outcome (no stage's state says it runs, so no
    process's liveness entered it, and no scorer's log was read for it): it holds while
    they do, so an index may keep it (``results.status``)."""
    running = any(s is not None and s.state == "running" for s in (rec.solve_state, rec.evaluate_state))
    return not running and rec.attempt_log_tails is None


def cell_outcome(
    cell_dir: str | Path, alive: Liveness = lambda state: None, all_records: bool = True
) -> tuple[str, str, CellRecords]:
    """Read and classify one cell dir (one listing, then only the files that exist).
    Without all_records, a valid metrics.json and the evaluate.json that vouches for it
    are the only files read, opened before anything is listed: enough to say `scored`
    (status reads most cells so)."""
    if not all_records:
        metrics, _, digest = _read_metrics(cell_dir)
        if metrics is not None:
            rec = CellRecords(
                metrics=metrics,
                metrics_sha256=digest,
                evaluate=EvaluateRecord.read(os.path.join(cell_dir, EVALUATE)),
                solve_listed=os.path.exists(os.path.join(cell_dir, SOLVE)),
            )
            if records_disagree(rec) is None:
                return (*classify(rec, alive), rec)
    try:
        present = frozenset(e.name for e in os.scandir(cell_dir))
    except (FileNotFoundError, NotADirectoryError):
        return "pending", "not solved yet", CellRecords()
    rec = read_cell(cell_dir, present)
    outcome, evidence = classify(rec, alive)
    return outcome, evidence, rec


#: Cells read at once where reading waits on the filesystem. On a network filesystem a
#: cell's cost is latency, not CPU, so threads waiting on it at the same time cut the wall
#: time; on a local disk or the page cache the same threads only contend for the GIL (16
#: of them made status 2.9x slower than one: issue 39), so one thread reads there.
READ_THREADS = 16
_CHUNK = 64
#: cells read by the calling thread to tell the filesystem: one (which also pays for what
#: is done once: lazy imports, the first lookups), then these, their blocks counted
_PROBE = 16


def map_cells(read: Callable[[str], T], cell_dirs: Sequence[str], threads: int = READ_THREADS) -> list[T]:
    """read(d) of every cell dir, in order. The first 1 + _PROBE cells are read by this
    thread, counting how often the _PROBE blocked (the first also pays for what is done
    once); the rest by this thread too unless those reads waited on the filesystem, else
    by a pool of ``threads`` (chunks of cells, so that 20,000 cells are not 20,000
    futures)."""

    def read_chunk(chunk: Sequence[str]) -> list[T]:
        return [read(d) for d in chunk]

    first = read_chunk(cell_dirs[:1])
    blocked = _blocked()
    first += read_chunk(cell_dirs[1 : 1 + _PROBE])
    blocked = _blocked() - blocked
    rest = cell_dirs[1 + _PROBE :]
    chunks = [rest[i : i + _CHUNK] for i in range(0, len(rest), _CHUNK)]
    if threads <= 1 or len(chunks) < 2 or not waits_on_the_filesystem(blocked, _PROBE):
        return first + read_chunk(rest)
    with ThreadPoolExecutor(threads, thread_name_prefix="cells") as pool:
        return first + [r for part in pool.map(read_chunk, chunks) for r in part]


def waits_on_the_filesystem(blocked: int, cells: int) -> bool:
    """Whether reading ``cells`` cells that blocked ``blocked`` times waited on the
    filesystem: a network filesystem's round trips (or a cold disk) block a reader at
    every file it looks up or reads, several a cell; the page cache about once in 45 cells
    (measured). Counted in blocks, not time, so a CPU busy with other work does not look
    like a slow filesystem."""
    return blocked >= 2 * cells


def _blocked() -> int:
    """How often this thread has blocked (its voluntary context switches)."""
    return resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw


def cell_outcomes(
    cell_dirs: Sequence[str],
    alive: Liveness = lambda state: None,
    all_records: bool = True,
    threads: int = READ_THREADS,
) -> list[tuple[str, str, CellRecords]]:
    """cell_outcome of every dir, in order, read by a small pool of threads."""
    return map_cells(lambda d: cell_outcome(d, alive, all_records), cell_dirs, threads)
