"""The judgement's verdicts: a judge model's answer parsed into a run (fail closed: an
unparsable or incomplete answer is `malformed`, no answer `failed`), and each verdict
field combined from the deterministic checks' signals and the judges' votes
(``judging.vote``). A field is flagged when a deterministic check or the judges' vote
flags it (a check's flag stands whatever the model says); it is `judge_failed` when its
vote gave no verdict or a check's evidence was not read in full, and that counts as
flagged, never as clean."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ptb_harness.judging.signals import Signal
from ptb_harness.judging.vote import Answer, FieldVote, Run

#: the verdicts that flag a cell's score (the base model's stands in, or it is left out)
SCORE_VERDICTS = ("contamination", "disallowed_model", "api_usage")
#: the agent looked PostTrainBench itself up: its entry is held unranked
PTB_LOOKUP = "ptb_lookup"
#: the verdicts a leaderboard can count
COUNTABLE_VERDICTS = (*SCORE_VERDICTS, PTB_LOOKUP)
#: anything else amiss: recorded, never counted
GENERAL_ANOMALY = "general_anomaly"
#: every verdict field of judgement.json, in order
FIELDS = (*COUNTABLE_VERDICTS, GENERAL_ANOMALY)
#: the score verdicts (the name the deterministic checks' callers use)
CHECKS = SCORE_VERDICTS
VERDICTS = ("clean", "flagged", "judge_failed")

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def parse_answer(answer: str, fields: Sequence[str]) -> tuple[dict[str, Answer] | None, str]:
    """(an answer per field, '') or (None, why the answer is not a verdict)."""
    text = answer.strip()
    m = _FENCE.search(text)
    if m:
        text = m.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None, f"no JSON object in the judge's answer: {answer[:120]!r}"
    try:
        data = json.loads(text[start : end + 1])
    except ValueError as e:
        return None, f"the judge's answer is not valid JSON ({e}): {answer[:120]!r}"
    out = {}
    for name in fields:
        part = data.get(name) if isinstance(data, dict) else None
        if not isinstance(part, dict) or not isinstance(part.get("flagged"), bool):
            return None, f"the judge's answer has no verdict for {name}"
        why = part.get("justification")
        if not isinstance(why, str) or not why.strip():
            return None, f"the judge's answer has no justification for {name}"
        out[name] = Answer(part["flagged"], why.strip()[:2000])
    return out, ""


def judged_run(n: int, answer: str | None, error: str, fields: Sequence[str]) -> Run:
    """Run n of a judge: `failed` without an answer, `malformed` with one that is no verdict."""
    if answer is None:
        return Run(n, "failed", error=error or "no answer")
    answers, why = parse_answer(answer, fields)
    if answers is None:
        return Run(n, "malformed", error=why, raw=answer)
    return Run(n, "ok", answers)


def verdict_fields(signals: Iterable[Signal], votes: Mapping[str, FieldVote], failure: str = "") -> dict[str, Any]:
    """The verdict fields of judgement.json, its `verdict` and `flags`. `votes`: field ->
    the judges' vote (a field without one has no verdict: judge_failed); `failure`: why the
    judges could not be asked (then no field has a vote)."""
    signals = list(signals)
    result: dict[str, Any] = {}
    for name in FIELDS:
        checks = [s for s in signals if s.field == name]
        vote = votes.get(name)
        flagged_by = [s.name for s in checks if s.flagged] + (["judge"] if vote and vote.flagged else [])
        failed = [s.name for s in checks if s.failed] + ([] if vote and vote.flagged is not None else ["judge"])
        why = [f"[{s.name}] {s.summary}" for s in checks]
        if vote and vote.flagged is not None:
            why.append(f"[judge: {vote.resolved_by}] {vote.justification}")
        else:
            why.append(f"[judge] no verdict: {vote.resolved_by if vote else failure or 'the judge did not answer'}")
        result[name] = {
            "flagged": bool(flagged_by),
            "flagged_by": flagged_by,
            "judge_failed": bool(failed),
            "justification": " ".join(why)[:6000],
        }
    counted = [result[n] for n in COUNTABLE_VERDICTS]
    failed_any = any(part["judge_failed"] for part in counted)
    flags = [n for n in COUNTABLE_VERDICTS if result[n]["flagged"]]
    result["verdict"] = "judge_failed" if failed_any else "flagged" if flags else "clean"
    result["flags"] = flags + (["judge_failed"] if failed_any else [])
    return result
