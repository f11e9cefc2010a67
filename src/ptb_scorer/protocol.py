"""The scorer <-> harness protocol: what a task's evaluate.py prints and exits with, and
the one reader of an attempt's log that the harness decides from.

An attempt's log (the scorer's stdout and stderr, timestamped by the harness) holds:

- ``PTB_SCORER_INFO {json}``: what this attempt runs with (its token cap first), printed
  before scoring; read from the log's head into evaluate.json.
- ``PTB_MODEL_INVALID: why`` (exit 3): the model, not the machine, cannot be scored. It
  stops the harness's ladder (the model will not change between attempts) and makes the
  cell ``agent_failed``.
- ``PTB_GRADER_FAILED: why`` (exit 4): the grader model did not answer; an
  infrastructure failure, never a score.
- ``PTB_SCORER_ERROR: why`` (exit 2: data missing, 1: anything else).
- ``PTB_MODEL_LOADED n=N backend=B seconds=S``: the model was loaded (a transformers
  model, or a vLLM server started), the Nth time in this attempt: one attempt loads it
  once, whatever its seeds.

With ``--seeds S1,S2,...`` (PostTrainBench v1.2's final evaluation, :mod:`ptb_scorer.seeds`)
an attempt runs each seed in turn on the one loaded model and writes each seed's metrics
to its own file (:func:`seed_output` of ``--json-output-file``) as soon as it is scored,
then prints ``PTB_SEED_SCORED S accuracy=A``; a seed whose run failed prints
``PTB_SEED_FAILED: S: why`` and the attempt goes on to the next seed, unless
``--first-seed-gates`` is given and it was the first: then the attempt ends there (exit
1), as upstream skips the other seeds until the first has succeeded. The harness reads the
seeds' files, not the exit status, to learn which seeds scored.

Beside the scorer's own lines, the words with which the model libraries refuse a model
(:data:`MODEL_FAULTS`) also say the model is at fault.

The scorer never imports ptb_harness; the harness imports this module (its evaluate stage
and ``ptb_harness.results.outcome``).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

#: Environment variable through which the harness hands a scorer its grader endpoint
#: (the JSON of a ``ptb_scorer.llm_client.Endpoint``: names the key variable, never holds the key).
GRADER_ENV = "PTB_GRADER"
#: ... and the attention kernels the transformers backend may use (comma-separated
#: ``ptb_scorer.engine.SDPA_KERNELS``; campaign key evaluate.sdpa_kernels)
SDPA_KERNELS_ENV = "PTB_SDPA_KERNELS"

SCORER_INFO_MARK = "PTB_SCORER_INFO"
MODEL_INVALID_MARK = "PTB_MODEL_INVALID:"
GRADER_FAILED_MARK = "PTB_GRADER_FAILED:"
SCORER_ERROR_MARK = "PTB_SCORER_ERROR:"
MODEL_LOADED_MARK = "PTB_MODEL_LOADED"
SEED_SCORED_MARK = "PTB_SEED_SCORED"
SEED_FAILED_MARK = "PTB_SEED_FAILED:"

EXIT_SCORED = 0
EXIT_SCORER_ERROR = 1
EXIT_DATA_MISSING = 2
EXIT_MODEL_INVALID = 3
EXIT_GRADER_FAILED = 4


# -- the scorer's side ---------------------------------------------------------------------------
def _emit(line: str) -> None:
    print(line, flush=True)


def emit_info(record: dict[str, Any]) -> None:
    """What this attempt runs with, before any scoring."""
    _emit(f"{SCORER_INFO_MARK} " + json.dumps(record, sort_keys=True))


def emit_model_invalid(why: object) -> int:
    """The model cannot be scored (the agent's failure); returns the exit status."""
    _emit(f"{MODEL_INVALID_MARK} {why}")
    return EXIT_MODEL_INVALID


def emit_grader_failed(why: object) -> int:
    """The grader did not answer (an infrastructure failure); returns the exit status."""
    _emit(f"{GRADER_FAILED_MARK} {why}")
    return EXIT_GRADER_FAILED


def emit_scorer_error(why: str, status: int = EXIT_SCORER_ERROR) -> int:
    """Any other failure, in one line; returns the exit status (EXIT_DATA_MISSING or 1)."""
    _emit(f"{SCORER_ERROR_MARK} {why}")
    return status


_loads = 0


def emit_model_loaded(backend: str, seconds: float) -> None:
    """The model was loaded (call once per load: the line counts them)."""
    global _loads
    _loads += 1
    _emit(f"{MODEL_LOADED_MARK} n={_loads} backend={backend} seconds={seconds:.2f}")


def emit_seed_scored(seed: int, accuracy: float) -> None:
    _emit(f"{SEED_SCORED_MARK} {seed} accuracy={accuracy}")


def emit_seed_failed(seed: int, why: object) -> None:
    """One seed's run failed (its reason on one line); the attempt may go on."""
    text = " ".join(str(why).split())[:300]
    _emit(f"{SEED_FAILED_MARK} {seed}: {text}")


def seed_output(json_output_file: str | os.PathLike[str], seed: int) -> Path:
    """Where an attempt with seeds writes one seed's metrics: beside ``--json-output-file``
    (metrics.json -> metrics.seed-72332.json)."""
    path = Path(json_output_file)
    return path.with_name(f"{path.stem}.seed-{seed}{path.suffix}")


def fail_attempt(error: Exception) -> NoReturn:
    """For scorers whose grader failed: the named reason the harness reads, then exit
    non-zero (no metrics: a failed attempt, never a score)."""
    sys.exit(emit_grader_failed(error))


# -- the harness's side --------------------------------------------------------------------------
#: How much of an attempt log's start is searched for PTB_SCORER_INFO, and of its end for
#: the lines that say why it failed (they are the scorer's last words).
HEAD_BYTES = 256 * 1024
TAIL_BYTES = 64 * 1024

_SCORER_INFO = re.compile(r"PTB_SCORER_INFO (\{.*\})\s*$", re.M)
_MODEL_INVALID = re.compile(r"PTB_MODEL_INVALID: (.*)$", re.M)
_MODEL_LOADED = re.compile(r"PTB_MODEL_LOADED n=(\d{1,6}) ", re.M)
_SEED_FAILED = re.compile(r"PTB_SEED_FAILED: (\d{1,12}): (.*)$", re.M)

#: What a scorer's log says when the model, not the machine, could not be scored.
MODEL_FAULTS = re.compile(
    r"PTB_MODEL_INVALID:.*"
    r"|does not appear to have (?:a file named|files named) [\w.,\- ]+"
    r"|Unrecognized (?:configuration class|model)[^\n]*"
    r"|(?:SafetensorError|safetensors_rust\.SafetensorError)[^\n]*"
    r"|Error while deserializing header[^\n]*"
    r"|is not a valid model identifier[^\n]*"
    r"|No such file or directory: '[^']*(?:config\.json|\.safetensors|\.bin)'"
    r"|size mismatch for [^\n]*"
    # transformers refusing remote code (any scorer that loads without trust_remote_code)
    r"|contains custom code which must be executed[^\n]*"
)


def model_fault(tail: str) -> str | None:
    """The scorer's or a model library's words saying the model cannot be scored (the
    last such in ``tail``: the error the attempt died of), or None."""
    matches = MODEL_FAULTS.findall(tail)
    return matches[-1].strip()[:300] if matches else None


@dataclass(frozen=True)
class AttemptLog:
    """An attempt log's head and tail, as read by :func:`read_attempt_log`."""

    head: str = ""
    tail: str = ""

    @property
    def scorer_info(self) -> dict[str, Any] | None:
        """The PTB_SCORER_INFO record (the first in the head), or None."""
        m = _SCORER_INFO.search(self.head)
        if not m:
            return None
        try:
            info = json.loads(m.group(1))
        except ValueError:
            return None
        return info if isinstance(info, dict) else None

    @property
    def model_invalid(self) -> str | None:
        """The reason on the last PTB_MODEL_INVALID line of the tail, or None."""
        found = _MODEL_INVALID.findall(self.tail)
        return found[-1].strip()[:300] if found else None

    @property
    def grader_failed(self) -> str | None:
        """'grader failed: why' from the last PTB_GRADER_FAILED line of the tail, or None."""
        lines = [ln for ln in self.tail.splitlines() if GRADER_FAILED_MARK in ln]
        if not lines:
            return None
        return "grader failed: " + lines[-1].split(GRADER_FAILED_MARK, 1)[1].strip()[:300]

    @property
    def model_fault(self) -> str | None:
        return model_fault(self.tail)

    @property
    def model_loads(self) -> int:
        """How many times the attempt loaded the model (the highest PTB_MODEL_LOADED count
        in the head or the tail; 0 when none shows)."""
        counts = [int(n) for n in _MODEL_LOADED.findall(self.head) + _MODEL_LOADED.findall(self.tail)]
        return max(counts, default=0)

    @property
    def seed_failures(self) -> dict[int, str]:
        """Why each seed failed, from its PTB_SEED_FAILED line (head or tail; the last one wins)."""
        found = _SEED_FAILED.findall(self.head) + _SEED_FAILED.findall(self.tail)
        return {int(seed): why.strip()[:300] for seed, why in found}


def read_attempt_log(
    path: str | os.PathLike[str], head_bytes: int = HEAD_BYTES, tail_bytes: int = TAIL_BYTES
) -> AttemptLog:
    """The first ``head_bytes`` and last ``tail_bytes`` of an attempt log, decoded; an
    empty AttemptLog when it cannot be read or is not a regular file (no link followed,
    a FIFO never waited on)."""
    try:
        fd = os.open(Path(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return AttemptLog()
    with os.fdopen(fd, "rb") as f:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return AttemptLog()
            head = f.read(head_bytes) if head_bytes else b""
            f.seek(max(0, f.seek(0, os.SEEK_END) - tail_bytes))
            tail = f.read(tail_bytes)
        except OSError:
            return AttemptLog()
    return AttemptLog(head.decode("utf-8", "replace"), tail.decode("utf-8", "replace"))
