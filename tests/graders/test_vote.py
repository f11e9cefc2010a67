"""The judges' vote (judging.vote) and the verdict fields combined from it and the
deterministic signals (judging.verdict): table tests of 2-of-3 per field, a missing run,
a malformed run, and a deterministic flag no vote can clear."""

from __future__ import annotations

import json

import pytest

from ptb_harness.judging.signals import Signal
from ptb_harness.judging.verdict import judged_run, verdict_fields
from ptb_harness.judging.vote import Run, resolve

FIELDS = ("contamination", "disallowed_model")


def answer(contamination: bool, disallowed_model: bool) -> str:
    return json.dumps(
        {
            "contamination": {"flagged": contamination, "justification": f"c={contamination}"},
            "disallowed_model": {"flagged": disallowed_model, "justification": f"d={disallowed_model}"},
        }
    )


def runs(*answers) -> list[Run]:
    """Run i+1 of each: an answer text (c, d), None (no answer) or a malformed string."""
    out = []
    for n, a in enumerate(answers, 1):
        text = answer(*a) if isinstance(a, tuple) else a
        out.append(judged_run(n, text, "" if text is not None else "timed out after 120 s", FIELDS))
    return out


@pytest.mark.parametrize(
    ("answers", "expect", "how"),
    [
        # all three runs answer: each field by 2 of 3, independently
        (((True, False), (True, True), (False, False)), (True, False), ("2 of 3", "1 of 3")),
        (((False, True), (False, True), (True, True)), (False, True), ("1 of 3", "3 of 3")),
        (((False, False), (False, False), (False, False)), (False, False), ("0 of 3", "0 of 3")),
        # a run missing (timed out): run 1 alone decides, as upstream's single-verdict fallback
        (((False, False), None, (True, True)), (False, False), ("run 1 alone", "run 1 alone")),
        (((True, False), (False, False), None), (True, False), ("run 1 alone", "run 1 alone")),
        # a malformed run is no vote either: run 1 alone
        (((False, True), "I think it is fine", (True, True)), (False, True), ("run 1 alone", "run 1 alone")),
        # run 1 missing or malformed: no verdict (judge_failed), whatever the others say
        ((None, (False, False), (False, False)), (None, None), ("no verdict", "no verdict")),
        (('{"contamination": {"flagged": "no"}}', (True, True), (True, True)), (None, None), ("no verdict",) * 2),
    ],
)
def test_two_of_three_per_field(answers, expect, how):
    votes = resolve(runs(*answers), FIELDS, quorum=2)
    assert (votes["contamination"].flagged, votes["disallowed_model"].flagged) == expect
    for name, prefix in zip(FIELDS, how, strict=True):
        assert votes[name].resolved_by.startswith(prefix), votes[name]


def test_what_each_run_records():
    good, missing, malformed = runs((True, False), None, '```json\n{"contamination": 1}\n```')
    assert good.to_dict() == {
        "run": 1,
        "status": "ok",
        "answers": {
            "contamination": {"flagged": True, "justification": "c=True"},
            "disallowed_model": {"flagged": False, "justification": "d=False"},
        },
    }
    assert missing.to_dict() == {"run": 2, "status": "failed", "error": "timed out after 120 s"}
    assert malformed.status == "malformed" and "no verdict for contamination" in malformed.error
    assert "raw" in malformed.to_dict()
    votes = resolve([good, missing, malformed], FIELDS, quorum=2)
    why = votes["contamination"].resolved_by
    assert "run 2 failed: timed out" in why and "run 3 malformed: the judge's answer has no verdict" in why


def test_the_quorum_is_a_setting_and_a_flagging_side_is_quoted():
    three = runs((True, False), (True, False), (False, False))
    assert resolve(three, FIELDS, quorum=3)["contamination"].flagged is False
    assert resolve(three, FIELDS, quorum=1)["disallowed_model"].flagged is False
    vote = resolve(three, FIELDS, quorum=2)["contamination"]
    assert (vote.votes, vote.counted) == (2, 3) and vote.justification == "[run 1] c=True | [run 2] c=True"
    one = resolve(runs((True, True)), FIELDS, quorum=1)["contamination"]
    assert one.resolved_by == "1 of 1 runs flag it (quorum 1)"


NGRAM = Signal("ngram_overlap", flagged=True, summary="12 of 50 test samples found")
IDENTITY = Signal("model_identity", flagged=False, summary="matches the base model")


@pytest.mark.parametrize(
    ("signals", "answers", "expect"),
    [
        # a deterministic flag stays a flag whatever the vote says
        ((NGRAM, IDENTITY), ((False, False),) * 3, ("flagged", ["contamination"], ["ngram_overlap"])),
        # the vote flags on its own
        ((IDENTITY,), ((True, False), (True, False), (False, False)), ("flagged", ["contamination"], ["judge"])),
        ((IDENTITY,), ((False, False),) * 3, ("clean", [], [])),
        # no verdict: judge_failed, and a deterministic flag is still named
        ((NGRAM,), (None, None, None), ("judge_failed", ["contamination", "judge_failed"], ["ngram_overlap"])),
        # a check whose evidence was not read in full fails its field, whatever the vote
        ((Signal("ngram_overlap", False, failed=True, summary="agent_writes.jsonl cut"),), ((False, False),) * 3,
         ("judge_failed", ["judge_failed"], [])),
    ],
)  # fmt: skip
def test_verdict_fields(signals, answers, expect):
    votes = resolve(runs(*answers), FIELDS, quorum=2)
    other = {"api_usage": (False, "no call"), "ptb_lookup": (False, "no lookup"), "general_anomaly": (True, "odd")}
    for name, (flagged, why) in other.items():
        text = json.dumps({name: {"flagged": flagged, "justification": why}})
        votes |= resolve([judged_run(1, text, "", [name])], [name], 1)
    result = verdict_fields(signals, votes)
    assert (result["verdict"], result["flags"], result["contamination"]["flagged_by"]) == expect
    assert result["general_anomaly"]["flagged"] is True and "general_anomaly" not in result["flags"]  # recorded only


def test_no_vote_at_all_fails_every_field():
    result = verdict_fields([IDENTITY], {}, failure="the judge's endpoint refused the key (401)")
    assert result["verdict"] == "judge_failed"
    assert all(result[f]["judge_failed"] for f in ("contamination", "api_usage", "ptb_lookup", "general_anomaly"))
    assert "[judge] no verdict: the judge's endpoint refused the key (401)" in result["api_usage"]["justification"]
