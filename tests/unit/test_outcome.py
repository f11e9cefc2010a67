"""The outcome function over a table of record combinations, and reading them from disk."""

from __future__ import annotations

import json
import os
import socket

import pytest

from ptb_harness.results.outcome import CellRecords, cell_outcome, classify, local_liveness
from ptb_harness.runtime.procs import process_start_ticks

SOLVED = {"description": "exited 0", "final_model_files": 3}
SOLVED_FAILING_AGENT = {"description": "exited 3", "final_model_files": 2}
NO_MODEL = {"description": "exited 3", "final_model_files": 0}
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

CASES = [
    # id, records, outcome, evidence fragment
    ("nothing yet", CellRecords(), "pending", "not solved yet"),
    ("scored", CellRecords(solve=SOLVED, metrics={"accuracy": 0.5}), "scored", "accuracy 0.5"),
    (
        "scored even if the agent failed",
        CellRecords(solve=SOLVED_FAILING_AGENT, metrics={"accuracy": 0.1}),
        "scored",
        "",
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
        "rerun after a preflight failure: solved now",
        CellRecords(solve=SOLVED, preflight={"status": "failed", "reason": "x"}, metrics={"accuracy": 0.2}),
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
    assert cell_outcome(cell)[:2] == ("scored", "accuracy 0.4")


def test_records_broken_by_hand_give_an_outcome_not_a_traceback(tmp_path):
    cell = tmp_path / "cell"
    (cell / "metrics.json").mkdir(parents=True)  # a directory where a record should be
    (cell / "solve.json").write_text(json.dumps(SOLVED))
    attempts = [{"attempt": "first", "ok": False, "log": "evaluate/a.log"}, "not an attempt"]
    (cell / "evaluate.json").write_text(json.dumps({**EV_FAILED, "attempts": attempts}))
    (cell / "solve.state.json").mkdir()
    for all_records in (True, False):
        outcome, why, _ = cell_outcome(cell, all_records=all_records)
        assert (outcome, why.startswith("scorer: no valid metrics")) == ("infra_failed", True)
