"""The cell's files and typed records (ptb_harness.core.cell_files): tolerant reads of
records of older and newer harness versions, round trips that keep what they do not
know, and bounded, link-safe reads."""

from __future__ import annotations

import json
import os

import pytest

from ptb_harness.core import cell_files as cf
from ptb_harness.core.cell_files import (
    EvaluateAttempt,
    EvaluateRecord,
    Judgement,
    Preflight,
    SolveAttempt,
    SolveAttempts,
    SolveRecord,
    StageState,
    UsageRecord,
)

#: a solve.json as the harness wrote it (cec4b27), with a key a newer harness added
SOLVE_JSON = {
    "cell": {"agent": "a", "task": "t", "model": "m", "hours": "1", "num_gpus": "0", "run": "0"},
    "status": "exited",
    "exit_code": 0,
    "signal": None,
    "description": "exited with code 0",
    "final_model_present": True,
    "final_model_files": 3,
    "agent_problem": None,
    "earlier_attempts": [],
    "key_of_a_newer_harness": 1.5,
}


def test_a_record_round_trips_and_keeps_the_keys_it_does_not_know():
    rec = SolveRecord.from_dict(SOLVE_JSON)
    assert rec.final_model_files == 3 and rec.agent_problem is None and rec.description == "exited with code 0"
    assert rec.extra == {"key_of_a_newer_harness": 1.5}
    out = rec.to_dict()
    assert out["key_of_a_newer_harness"] == 1.5
    assert {k: out[k] for k in SOLVE_JSON} == SOLVE_JSON
    assert SolveRecord.from_dict(out) == rec


def test_a_record_of_an_older_harness_reads_with_defaults():
    old = {"status": "timeout", "exit_code": None, "final_model_files": 0}
    rec = SolveRecord.from_dict(old)
    assert rec.status == "timeout" and rec.attempt is None and rec.earlier_attempts is None and rec.extra == {}


@pytest.mark.parametrize("junk", [None, [], "x", 3, {"attempts": "not a list"}, {"attempts": [1, "a", None]}])
def test_anything_reads_without_raising(junk):
    assert isinstance(SolveRecord.from_dict(junk), SolveRecord)
    got = SolveAttempts.from_dict(junk)
    assert isinstance(got, SolveAttempts)
    if isinstance(junk, dict) and isinstance(junk["attempts"], list):
        assert all(isinstance(a, SolveAttempt) and a.n is None for a in got.attempts)


def test_optional_keys_stay_out_until_set_and_nested_records_round_trip():
    ev = EvaluateRecord(
        cell={"agent": "a"}, started_at="t0", harness={}, attempts=(EvaluateAttempt(attempt=1, ok=False),)
    )
    out = ev.to_dict()
    assert not {"status", "accuracy", "metrics_sha256", "reason", "ended_at", "scorer"} & set(out)
    assert out["attempts"][0]["attempt"] == 1 and out["attempts"][0]["problem"] is None
    scored = ev.replace(status="scored", accuracy=0.5, metrics_sha256="ab")
    assert EvaluateRecord.from_dict(json.loads(json.dumps(scored.to_dict()))) == scored
    state = StageState(stage="solve", state="running", pid=1)
    assert "reason" not in state.to_dict() and state.replace(state="failed", reason="r").to_dict()["reason"] == "r"


def test_an_unknown_nested_key_survives_a_read_modify_write(tmp_path):
    path = tmp_path / cf.ATTEMPTS
    path.write_text(json.dumps({"attempts": [{"n": 1, "status": "done", "cgroup": "/sys/x"}], "v": 2}))
    rec = SolveAttempts.read(path)
    rec.replace(attempts=(*rec.attempts, SolveAttempt(n=2))).write(path)
    data = json.loads(path.read_text())
    assert data["v"] == 2 and data["attempts"][0]["cgroup"] == "/sys/x" and data["attempts"][1]["n"] == 2


def test_read_is_bounded_and_link_safe(tmp_path):
    assert UsageRecord.read(tmp_path / cf.USAGE) is None  # missing
    (tmp_path / "real.json").write_text(json.dumps({"input_tokens": 5}))
    os.symlink(tmp_path / "real.json", tmp_path / cf.USAGE)
    assert UsageRecord.read(tmp_path / cf.USAGE) is None  # a link is not followed
    (tmp_path / cf.PREFLIGHT).write_text("[1, 2]")
    assert Preflight.read(tmp_path / cf.PREFLIGHT) is None  # not an object
    (tmp_path / cf.JUDGEMENT).write_text(json.dumps({"verdict": "clean", "new_check": {"flagged": True}}))
    j = Judgement.read(tmp_path / cf.JUDGEMENT)
    assert j.verdict == "clean" and j.check("new_check") == {"flagged": True} and j.check("api_usage") is None


def test_the_names_and_the_record_order():
    assert cf.state_file("solve") == cf.SOLVE_STATE == "solve.state.json"
    assert cf.stage_log("evaluate") == "logs/evaluate.log" and cf.lock_file("judge") == ".judge.lock"
    assert set(cf.OUTCOME_RECORDS) <= set(cf.RECORDS) and set(cf.RECORDS) >= cf.OPEN_RECORDS
    assert set(cf.RECORDS) <= cf.FILE_NAMES
    # every record class names a file of the cell
    for cls in (SolveRecord, EvaluateRecord, SolveAttempts, Preflight, UsageRecord, Judgement):
        assert cls.FILE in cf.FILE_NAMES
