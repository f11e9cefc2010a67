"""The deterministic signals' one shape (judging.signals): what judgement.json holds and the
verdicts read back; a malformed record reads as a failed signal, never as a clean one."""

from __future__ import annotations

import json

import pytest

from ptb_harness.judging.signals import FIELD_OF, SIGNALS, Finding, Signal, failed


def test_a_signal_round_trips_through_json():
    s = Signal(
        "ngram_overlap",
        True,
        summary="5 of 5 test samples found",
        findings=(Finding("file", "home/agent/x.jsonl", "test samples 0, 1", "Natalia sold", gone=True),),
        details={"test_samples": 5, "contaminated_samples": 5},
    )
    back = Signal.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s and back.field == "contamination"
    assert s.to_dict()["findings"][0]["gone"] is True


def test_every_signal_flags_one_verdict_field():
    assert set(SIGNALS) == {"ngram_overlap", "model_identity", "hosted_api", "ptb_lookup"}
    assert FIELD_OF["hosted_api"] == "api_usage" and FIELD_OF["ptb_lookup"] == "ptb_lookup"
    assert failed("ptb_lookup", "llm_log.jsonl over its bound").failed


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"name": "ngram_overlap", "flagged": "no", "failed": False},
        {"name": "made_up", "flagged": False, "failed": False},
        {"name": "hosted_api", "flagged": False},
    ],
    ids=["empty", "flagged-not-bool", "unknown-name", "no-failed"],
)
def test_a_malformed_signal_reads_as_failed_and_flagged(record):
    s = Signal.from_dict(record)
    assert s.failed and s.flagged and "malformed" in s.summary
