"""The judge's verdict: the judge model's answer parsed (fail closed: an unparsable or
incomplete answer is no verdict), and combined with the deterministic checks. Each check
is flagged when a deterministic check or the judge flags it; no answer from the judge
is ``judge_failed``, which counts as flagged, never as clean."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

#: the three questions the judge answers, in the order every record and reader lists them
CHECKS = ("contamination", "disallowed_model", "api_usage")
VERDICTS = ("clean", "flagged", "judge_failed")
#: the verdicts a leaderboard can count: the score verdicts flag a cell's score (the base
#: model's stands in, or it is left out); ptb_lookup holds the whole entry unranked
SCORE_VERDICTS = CHECKS
PTB_LOOKUP = "ptb_lookup"
COUNTABLE_VERDICTS = (*SCORE_VERDICTS, PTB_LOOKUP)
#: anything else amiss: recorded, never counted
GENERAL_ANOMALY = "general_anomaly"

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def parse_verdict(answer: str) -> tuple[dict[str, dict[str, Any]] | None, str]:
    """(the three checks, '') or (None, why the answer is not a verdict)."""
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
    for check in CHECKS:
        part = data.get(check) if isinstance(data, dict) else None
        if not isinstance(part, dict) or not isinstance(part.get("flagged"), bool):
            return None, f"the judge's answer has no verdict for {check}"
        why = part.get("justification")
        if not isinstance(why, str) or not why.strip():
            return None, f"the judge's answer has no justification for {check}"
        out[check] = {"flagged": part["flagged"], "justification": why.strip()[:2000]}
    return out, ""


def combine(
    deterministic: Mapping[str, Mapping[str, Any]], judged: Mapping[str, Mapping[str, Any]] | None, failure: str
) -> dict[str, Any]:
    """The verdict: each check flagged when a deterministic check or the judge flags it;
    `judge_failed` (flagged) when the judge gave no verdict, whatever else says."""
    result: dict[str, Any] = {}
    flags = []
    for check in CHECKS:
        sources, why = [], []
        det = deterministic.get(check)
        if det is not None:
            why.append(f"[{det['source']}] {det['justification']}")
            if det["flagged"]:
                sources.append(det["source"])
        if judged is not None:
            why.append(f"[judge] {judged[check]['justification']}")
            if judged[check]["flagged"]:
                sources.append("judge")
        else:
            why.append(f"[judge] no verdict: {failure}")
        flagged = bool(sources)
        result[check] = {"flagged": flagged, "flagged_by": sources, "justification": " ".join(why)}
        if flagged:
            flags.append(check)
    result["verdict"] = "judge_failed" if judged is None else "flagged" if flags else "clean"
    result["flags"] = flags + (["judge_failed"] if judged is None else [])
    return result
