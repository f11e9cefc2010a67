"""The outcome function over a table of record combinations, and reading them from disk."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time

import pytest

from ptb_harness.results.outcome import (
    CellRecords,
    cell_outcome,
    classify,
    local_liveness,
    map_cells,
    waits_on_the_filesystem,
)
from ptb_harness.runtime.procs import process_start_ticks

SOLVED = {"description": "exited 0", "final_model_files": 3}
SOLVED_FAILING_AGENT = {"description": "exited 3", "final_model_files": 2}
NO_MODEL = {"description": "exited 3", "final_model_files": 0}
MEM_HIT = {"hit": "the agent hit its memory cap (256 MiB; 1 process killed)", "memory_bytes": 256 * 2**20}
PIDS_HIT = {"hit": "the agent hit its process cap (64; 1936 forks refused)", "pids_max": 64}
EV_FAILED = {"status": "failed", "reason": "no valid metrics after 4 attempts; last: evaluate.py exited 1"}
HOST = socket.gethostname()
ME = {"stage": "solve", "state": "running", "host": HOST, "pid": os.getpid(), "started_at": "t0"}
ME["pid_start_ticks"] = process_start_ticks(os.getpid())
DEAD = {**ME, "pid_start_ticks": -1}  # this pid, another start: the recorded process is gone
ELSEWHERE = {**ME, "host": "gpu-node-17"}
SLURM_LIVE = {**ELSEWHERE, "scheduler": {"SLURM_JOB_ID": "101"}}
SLURM_GONE = {**ELSEWHERE, "scheduler": {"SLURM_JOB_ID": "99"}}
EV_RUNNING = {**ME, "stage": "evaluate"}
EV_DEAD = {**DEAD, "stage": "evaluate"}


def scored(solve: dict, acc: float, **kw) -> CellRecords:
    """The records of a cell the evaluate stage scored: evaluate.json vouches for metrics.json."""
    evaluate = {"status": "scored", "accuracy": acc, "metrics_sha256": "ab12"}
    return CellRecords(solve=solve, metrics={"accuracy": acc}, metrics_sha256="ab12", evaluate=evaluate, **kw)


#: the solve stopped at its LLM budget (issue 25): its model is scored like a timeout's
LLM_BUDGET = {
    "status": "llm_budget_exhausted",
    "description": "stopped at its LLM budget (tokens 2749 of 2500; SIGTERM)",
}
CASES = [
    # id, records, outcome, evidence fragment
    ("nothing yet", CellRecords(), "pending", "not solved yet"),
    ("LLM budget spent, model scored", scored({**LLM_BUDGET, "final_model_files": 2}, 0.4), "scored", "accuracy 0.4"),
    (
        "LLM budget spent, model waits",
        CellRecords(solve={**LLM_BUDGET, "final_model_files": 2}),
        "pending",
        "solved (agent stopped at its LLM budget (tokens 2749 of 2500; SIGTERM)); not scored yet",
    ),
    (
        "LLM budget spent, no model",
        CellRecords(solve={**LLM_BUDGET, "final_model_files": 0}),
        "agent_failed",
        "agent stopped at its LLM budget (tokens 2749 of 2500; SIGTERM); no final model",
    ),
    (
        "LLM gateway died",
        CellRecords(solve_state={"state": "failed", "reason": "the LLM gateway exited with code 1"}),
        "infra_failed",
        "solve failed in the harness: the LLM gateway exited with code 1",
    ),
    ("scored", scored(SOLVED, 0.5), "scored", "accuracy 0.5"),
    ("scored even if the agent failed", scored(SOLVED_FAILING_AGENT, 0.1), "scored", ""),
    (
        "forged metrics, no evaluate.json",
        CellRecords(solve=SOLVED, metrics={"accuracy": 1.0}, metrics_sha256="ff"),
        "infra_failed",
        "records disagree (tampered or edited by hand): metrics.json without evaluate.json",
    ),
    (
        "metrics replaced after scoring",
        CellRecords(**{**scored(SOLVED, 0.5).__dict__, "metrics": {"accuracy": 1.0}, "metrics_sha256": "ff"}),
        "infra_failed",
        "sha256 differs",
    ),
    (
        "metrics without solve.json",
        CellRecords(**{**scored(SOLVED, 0.5).__dict__, "solve": None}),
        "infra_failed",
        "without solve.json",
    ),
    (
        "evaluate.json edited to another accuracy",
        CellRecords(**{**scored(SOLVED, 0.5).__dict__, "metrics": {"accuracy": 0.9}}),
        "infra_failed",
        "accuracy 0.9",
    ),
    ("corrupt metrics", CellRecords(solve=SOLVED, metrics_problem="not valid JSON"), "infra_failed", "invalid"),
    (
        "preflight refused",
        CellRecords(preflight={"status": "failed", "reason": "no driver"}),
        "infra_failed",
        "no driver",
    ),
    ("solve running here", CellRecords(solve_state=ME), "running", "solve running since t0"),
    ("solve process gone", CellRecords(solve_state=DEAD), "infra_failed", "died without a record"),
    ("solve on another host", CellRecords(solve_state=ELSEWHERE), "running", "not verifiable"),
    ("slurm job alive", CellRecords(solve_state=SLURM_LIVE), "running", "job 101"),
    ("slurm job gone", CellRecords(solve_state=SLURM_GONE), "infra_failed", "job 99"),
    (
        "solve harness failure",
        CellRecords(solve_state={**ME, "state": "failed", "reason": "site.tmp_root: 0.1 GB free"}),
        "infra_failed",
        "tmp_root",
    ),
    ("no final model", CellRecords(solve=NO_MODEL), "agent_failed", "exited 3; no final model"),
    ("evaluate said no model", CellRecords(solve=SOLVED, evaluate={"status": "no_model"}), "agent_failed", ""),
    ("solved, not scored", CellRecords(solve=SOLVED), "pending", "not scored yet"),
    ("evaluating", CellRecords(solve=SOLVED, evaluate={"status": "running"}, evaluate_state=EV_RUNNING), "running", ""),
    (
        "evaluate died",
        CellRecords(solve=SOLVED, evaluate={"status": "running"}, evaluate_state=EV_DEAD),
        "infra_failed",
        "died",
    ),
    (
        "scorer crashed (machine)",
        CellRecords(solve=SOLVED, evaluate=EV_FAILED, attempt_log_tails={1: "CUDA error: out of memory"}),
        "infra_failed",
        "scorer: no valid metrics",
    ),
    (
        "model cannot load",
        CellRecords(
            solve=SOLVED,
            evaluate=EV_FAILED,
            attempt_log_tails={
                1: "OSError: /m does not appear to have a file named config.json",
                2: "OSError: /m does not appear to have a file named config.json",
            },
        ),
        "agent_failed",
        "does not appear to have a file named config.json",
    ),
    (
        "scorer says model invalid",
        CellRecords(solve=SOLVED, evaluate=EV_FAILED, attempt_log_tails={1: "PTB_MODEL_INVALID: vocab size 12"}),
        "agent_failed",
        "vocab size 12",
    ),
    # the scorer refuses to load a model that would run the agent's code (ptb_scorer.refusals)
    *[
        (
            f"scorer refuses: {name}",
            CellRecords(solve=SOLVED, evaluate=EV_FAILED, attempt_log_tails={1: f"x\nPTB_MODEL_INVALID: {why}\n"}),
            "agent_failed",
            why,
        )
        for name, why in [
            ("remote code", "config.json asks for remote code (auto_map ['AutoModelForCausalLM'])"),
            ("tokenizer remote code", "the tokenizer asks for remote code (tokenizer auto_map, tokenizer_class 'T')"),
            ("pickle weights", "weights are pickles (pytorch_model.bin) and there is no *.safetensors"),
            ("custom_generate", "final_model has custom_generate/ (code that would replace generate())"),
        ]
    ],
    (
        "one attempt machine, one model",
        CellRecords(
            solve=SOLVED,
            evaluate=EV_FAILED,
            attempt_log_tails={1: "Killed", 2: "safetensors_rust.SafetensorError: header too large"},
        ),
        "infra_failed",
        "scorer",
    ),
    (
        "evaluate harness failure",
        CellRecords(solve=SOLVED, evaluate_state={**EV_RUNNING, "state": "failed", "reason": "no space"}),
        "infra_failed",
        "no space",
    ),
    (
        "the agent hit its memory cap and left nothing",
        CellRecords(solve={**NO_MODEL, "description": "killed by signal 9 (SIGKILL)", "limits": MEM_HIT}),
        "agent_failed",
        "agent killed by signal 9 (SIGKILL); the agent hit its memory cap (256 MiB; 1 process killed); no final model",
    ),
    (
        "the agent hit its process cap, its model refused",
        CellRecords(solve={**NO_MODEL, "limits": PIDS_HIT, "agent_problem": "final_model holds more than 3 files"}),
        "agent_failed",
        "exited 3; the agent hit its process cap (64; 1936 forks refused); final_model holds more than 3 files",
    ),
    (
        "a cap hit the agent got over: its model is scored",
        scored({**SOLVED, "limits": MEM_HIT}, 0.4),
        "scored",
        "accuracy 0.4",
    ),
    (
        "a cap hit the agent got over: waiting for its score",
        CellRecords(solve={**SOLVED, "limits": MEM_HIT}),
        "pending",
        "not scored yet",
    ),
    (
        "limits without a hit, or from a forged or older record",
        CellRecords(solve={**NO_MODEL, "limits": {"hit": None, "cgroup": None}}),
        "agent_failed",
        "exited 3; no final model",
    ),
    ("limits not a mapping", CellRecords(solve={**NO_MODEL, "limits": ["x"]}), "agent_failed", "exited 3; no final"),
    (
        "rerun after a preflight failure: solved now",
        scored(SOLVED, 0.2, preflight={"status": "failed", "reason": "x"}),
        "scored",
        "",
    ),
]


@pytest.mark.parametrize(("records", "outcome", "evidence"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_outcome_table(records, outcome, evidence):
    alive = local_liveness(lambda: {"101"})
    got, why = classify(records, alive)
    assert (got, evidence in why) == (outcome, True), why


def test_table_has_every_outcome():
    alive = local_liveness(lambda: {"101"})
    assert len(CASES) >= 15
    assert {classify(c[1], alive)[0] for c in CASES} == {"scored", "agent_failed", "infra_failed", "pending", "running"}


def test_squeue_is_asked_once_and_only_for_slurm_records():
    calls = []
    alive = local_liveness(lambda: calls.append(1) or {"101"})
    classify(CellRecords(solve_state=ME), alive)
    assert calls == []
    for _ in range(3):
        classify(CellRecords(solve_state=SLURM_LIVE), alive)
    assert calls == [1]


def test_cell_outcome_reads_the_records_on_disk(tmp_path):
    cell = tmp_path / "cell"
    assert cell_outcome(cell)[:2] == ("pending", "not solved yet")
    cell.mkdir()
    (cell / "solve.json").write_text(json.dumps(SOLVED))
    (cell / "evaluate").mkdir()
    (cell / "evaluate" / "attempt-1.log").write_text("x" * 100_000 + "\nPTB_MODEL_INVALID: no tokenizer\n")
    attempts = [{"attempt": 1, "ok": False, "log": "evaluate/attempt-1.log"}]
    (cell / "evaluate.json").write_text(json.dumps({**EV_FAILED, "attempts": attempts}))
    outcome, why, _ = cell_outcome(cell)
    assert (outcome, why.endswith("PTB_MODEL_INVALID: no tokenizer")) == ("agent_failed", True)
    (cell / "metrics.json").write_text('{"accuracy": 0.4')  # truncated by hand
    assert cell_outcome(cell)[0] == "infra_failed"
    (cell / "metrics.json").write_text('{"accuracy": 0.4}')
    for all_records in (True, False):  # written by hand: evaluate.json does not vouch for it
        outcome, why, _ = cell_outcome(cell, all_records=all_records)
        assert outcome == "infra_failed"
        assert why == "records disagree (tampered or edited by hand): metrics.json, but evaluate.json says failed"
    digest = hashlib.sha256(b'{"accuracy": 0.4}').hexdigest()
    (cell / "evaluate.json").write_text(json.dumps({"status": "scored", "accuracy": 0.4, "metrics_sha256": digest}))
    for all_records in (True, False):
        assert cell_outcome(cell, all_records=all_records)[:2] == ("scored", "accuracy 0.4")
    (cell / "metrics.json").write_text('{"accuracy": 1.0}')  # the score replaced afterwards
    assert "sha256 differs" in cell_outcome(cell, all_records=False)[1]


def test_bounded_reads_of_hostile_records(tmp_path):
    cell = tmp_path / "cell"
    cell.mkdir()
    (cell / "solve.json").write_text(json.dumps(SOLVED))
    (cell / "evaluate.json").write_text("[" * 5000 + "]" * 5000)  # nested far too deep
    (cell / "metrics.json").write_text('{"accuracy": ' + "[" * 1000 + "]" * 1000 + "}")
    outcome, why, _ = cell_outcome(cell)
    assert (outcome, "nested deeper" in why) == ("infra_failed", True), why
    (cell / "metrics.json").write_bytes(b'{"accuracy": 0.5, "pad": "' + b"x" * (3 * 2**20) + b'"}')
    outcome, why, _ = cell_outcome(cell)
    assert (outcome, "more than the 1048576" in why) == ("infra_failed", True), why
    (cell / "metrics.json").unlink()
    (cell / "metrics.json").symlink_to("/dev/zero")  # never opened for reading
    outcome, why, _ = cell_outcome(cell)
    assert outcome == "infra_failed" and "cannot be read" in why, why


def test_records_broken_by_hand_give_an_outcome_not_a_traceback(tmp_path):
    cell = tmp_path / "cell"
    (cell / "metrics.json").mkdir(parents=True)  # a directory where a record should be
    (cell / "solve.json").write_text(json.dumps(SOLVED))
    attempts = [{"attempt": "first", "ok": False, "log": "evaluate/a.log"}, "not an attempt"]
    (cell / "evaluate.json").write_text(json.dumps({**EV_FAILED, "attempts": attempts}))
    (cell / "solve.state.json").mkdir()
    for all_records in (True, False):
        outcome, why, _ = cell_outcome(cell, all_records=all_records)
        assert (outcome, why) == ("infra_failed", "metrics.json is invalid: not a regular file")
    (cell / "metrics.json").rmdir()
    outcome, why, _ = cell_outcome(cell)
    assert (outcome, why.startswith("scorer: no valid metrics")) == ("infra_failed", True)


# -- each model-fault pattern on its own ---------------------------------------------------------
# One row per pattern of MODEL_FAULTS, each line as transformers, safetensors, torch or vLLM
# print it, and chosen so that no other pattern matches it: deleting any one pattern fails
# its row. A CUDA out-of-memory is the machine's fault (or the scorer's settings), never
# the model's.

MODEL_FAULT_LINES = [
    ("scorer says so", "PTB_MODEL_INVALID: tokenizer has no chat template"),
    (
        "no weights file",
        "OSError: /work/final_model does not appear to have a file named pytorch_model.bin, model.safetensors,"
        " tf_model.h5, model.ckpt or flax_model.msgpack.",
    ),
    (
        "unrecognized model",
        "ValueError: Unrecognized model in /work/final_model. Should have a `model_type` key in its config.json,"
        " or contain one of the following strings in its name: albert, align, altclip",
    ),
    (
        "unrecognized configuration class",
        "ValueError: Unrecognized configuration class <class 'transformers.models.t5.configuration_t5.T5Config'>"
        " for this kind of AutoModel: AutoModelForCausalLM.",
    ),
    (
        "safetensors error",
        "safetensors_rust.SafetensorError: File does not contain tensor model.embed_tokens.weight",
    ),
    (
        "header, re-raised by a vLLM worker",
        "RuntimeError: Worker failed with error 'Error while deserializing header: HeaderTooLarge',"
        " please check the stack trace above for the root cause",
    ),
    (
        "not a model identifier",
        "OSError: /work/final_model is not a local folder and is not a valid model identifier listed on"
        " 'https://huggingface.co/models'",
    ),
    ("missing config.json", "FileNotFoundError: [Errno 2] No such file or directory: '/work/final_model/config.json'"),
    (
        "remote code refused by transformers",
        "ValueError: The repository /work/final_model contains custom code which must be executed to correctly"
        " load the model. You can inspect the repository content at /work/final_model .",
    ),
    (
        "size mismatch",
        "\tsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([32000, 4096]) from"
        " checkpoint, the shape in current model is torch.Size([32001, 4096]).",
    ),
]
CUDA_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of"
    " 139.72 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 138.60 GiB memory in use."
)
TRACEBACK = (
    "INFO loading /work/final_model\nTraceback (most recent call last):\n"
    '  File "/work/task/evaluate.py", line 41, in <module>\n    model = load(args.model_path)\n'
)


def _failed_cell(tmp_path, error_line: str, attempts: int = 2):
    """A solved cell whose every scorer attempt died with ``error_line``, on disk."""
    cell = tmp_path / "cell"
    (cell / "evaluate").mkdir(parents=True)
    (cell / "solve.json").write_text(json.dumps(SOLVED))
    records = []
    for k in range(1, attempts + 1):
        (cell / "evaluate" / f"attempt-{k}.log").write_text(f"{TRACEBACK}{error_line}\n")
        records.append({"attempt": k, "ok": False, "log": f"evaluate/attempt-{k}.log"})
    (cell / "evaluate.json").write_text(json.dumps({**EV_FAILED, "attempts": records}))
    return cell


@pytest.mark.parametrize("line", [r[1] for r in MODEL_FAULT_LINES], ids=[r[0] for r in MODEL_FAULT_LINES])
def test_each_model_fault_pattern_makes_the_cell_agent_failed(tmp_path, line):
    outcome, why, _ = cell_outcome(_failed_cell(tmp_path, line))
    assert outcome == "agent_failed", why
    assert "the model cannot be scored" in why
    # the evidence quotes the scorer's own words (the part of the line that the pattern names)
    assert any(word in why for word in line.split() if len(word) > 12), why


def test_cuda_out_of_memory_is_not_the_models_fault(tmp_path):
    outcome, why, _ = cell_outcome(_failed_cell(tmp_path, CUDA_OOM))
    assert (outcome, why.startswith("scorer: no valid metrics")) == ("infra_failed", True)


def test_one_attempt_without_a_model_fault_makes_it_the_machines(tmp_path):
    cell = _failed_cell(tmp_path, MODEL_FAULT_LINES[-1][1])
    (cell / "evaluate" / "attempt-2.log").write_text(f"{TRACEBACK}{CUDA_OOM}\n")
    assert cell_outcome(cell)[0] == "infra_failed"


def _reader(tmp_path, wait_s: float = 0.0, waits: int = 0):
    """A cell reader that notes the thread it ran on (and waits ``waits`` times wait_s, as
    a network filesystem's round trips would: blocking, not computing)."""
    threads: list[int] = []

    def read(d: str) -> str:
        threads.append(threading.get_ident())
        for _ in range(waits):
            time.sleep(wait_s)
        return (tmp_path / d / "metrics.json").read_text()

    return read, threads


def _cells(tmp_path, n: int) -> list[str]:
    for i in range(n):
        (tmp_path / f"c{i}").mkdir()
        (tmp_path / f"c{i}" / "metrics.json").write_text(f'{{"accuracy": {i / n}}}')
    return [f"c{i}" for i in range(n)]


def test_cells_on_a_local_disk_are_read_by_one_thread_in_order(tmp_path):
    """The page cache never blocks a reader: a pool would only contend for the GIL."""
    dirs = _cells(tmp_path, 300)
    read, threads = _reader(tmp_path)
    out = map_cells(read, dirs)
    assert out == [(tmp_path / d / "metrics.json").read_text() for d in dirs]
    assert set(threads) == {threading.get_ident()}


def test_cells_whose_reads_wait_are_read_by_a_pool_in_order(tmp_path):
    """Reads that block (a network filesystem's round trips, here a sleep) go to the pool
    after the first 17 cells (16 of them counted); the results keep the cells' order."""
    dirs = _cells(tmp_path, 300)
    read, threads = _reader(tmp_path, wait_s=0.002, waits=3)
    out = map_cells(read, dirs)
    assert out == [(tmp_path / d / "metrics.json").read_text() for d in dirs]
    assert len(set(threads)) > 1 and threads[:17] == [threading.get_ident()] * 17
    assert map_cells(read, []) == []


@pytest.mark.parametrize(
    ("blocked", "cells", "waits"), [(0, 16, False), (8, 16, False), (31, 16, False), (32, 16, True), (1300, 16, True)]
)
def test_a_reader_waits_on_the_filesystem_when_it_blocks_twice_a_cell(blocked, cells, waits):
    assert waits_on_the_filesystem(blocked, cells) is waits
