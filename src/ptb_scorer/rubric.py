"""Rubric grading as in HealthBench: for each rubric item of an example (a criterion
worth some points, negative for things to avoid), the grader says whether the
response meets it.

An example's score is the points of the items met over the points of its positive
items; the accuracy is the mean over examples clipped to [0, 1], with its standard
error. ``by_theme`` scores the examples of each example-level tag (``theme:...``);
``by_axis`` scores, over all examples, only the rubric items of each item-level tag
(``axis:...``), each clipped the same way.

Standard library only, plus the grader client (ptb_scorer.llm_client).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ptb_scorer.llm_client import LLMClient, LLMUnavailable

GRADER_TEMPLATE = """You grade one reply of an AI assistant in a conversation against ONE rubric
criterion. Read the conversation, the reply and the criterion, then answer with a JSON
object and nothing else: {{"explanation": "<why>", "criteria_met": true or false}}.
A criterion that describes something undesirable is "met" when the reply does that
undesirable thing. A criterion with several parts is met only when every part is.

# Conversation
{conversation}

# Reply to grade
{response}

# Rubric criterion ({points} points)
{criterion}"""

_JSON = re.compile(r"\{.*\}", re.S)


@dataclass(frozen=True)
class RubricItem:
    criterion: str
    points: float
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Example:
    uid: str
    conversation: tuple[dict[str, str], ...]
    rubrics: tuple[RubricItem, ...]
    tags: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> Example:
        """One row of HealthBench's jsonl (prompt_id, prompt, rubrics, example_tags)."""
        return cls(
            uid=str(rec["prompt_id"]),
            conversation=tuple({"role": m["role"], "content": m["content"]} for m in rec["prompt"]),
            rubrics=tuple(
                RubricItem(r["criterion"], float(r["points"]), tuple(r.get("tags") or ())) for r in rec["rubrics"]
            ),
            tags=tuple(rec.get("example_tags") or ()),
        )


def parse_met(text: str) -> bool | None:
    m = _JSON.search(text)
    if not m:
        return None
    try:
        data = json.loads(m.group(0))
    except ValueError:
        return None
    met = data.get("criteria_met") if isinstance(data, dict) else None
    return met if isinstance(met, bool) else None


def _conversation_text(conv: Sequence[Mapping[str, str]]) -> str:
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in conv)


def example_score(items: Sequence[RubricItem], met: Sequence[bool]) -> float | None:
    possible = sum(i.points for i in items if i.points > 0)
    if possible <= 0:
        return None
    return sum(i.points for i, m in zip(items, met, strict=True) if m) / possible


def _clipped_mean(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    stderr = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n) if n > 1 else 0.0
    return min(1.0, max(0.0, mean)), stderr


def grade(
    client: LLMClient, examples: Sequence[Example], responses: Mapping[str, str], max_tokens: int, retries: int = 2
) -> dict[str, Any]:
    """Grade every rubric item of every example; the metrics. An item whose answer cannot
    be parsed is asked again (up to `retries` more times), then the attempt fails."""
    jobs = [(ex, k) for ex in examples for k in range(len(ex.rubrics))]

    def ask(job: tuple[Example, int]) -> bool:
        ex, k = job
        item = ex.rubrics[k]
        prompt = GRADER_TEMPLATE.format(
            conversation=_conversation_text(ex.conversation),
            response=responses[ex.uid],
            points=f"{item.points:g}",
            criterion=item.criterion,
        )
        for _ in range(retries + 1):
            met = parse_met(client.chat([{"role": "user", "content": prompt}], max_tokens=max_tokens))
            if met is not None:
                return met
        raise LLMUnavailable(f"the grader's answers for {ex.uid} item {k} were not a criteria_met verdict")

    verdicts = client.map(ask, jobs)
    met_of: dict[str, list[bool]] = {}
    for (ex, _k), met in zip(jobs, verdicts, strict=True):
        met_of.setdefault(ex.uid, []).append(met)
    scores, by_theme, by_axis = _scores(examples, met_of)
    if not scores:
        raise LLMUnavailable("no example has a rubric with positive points: nothing to score")
    accuracy, stderr = _clipped_mean(list(scores.values()))
    return {
        "accuracy": accuracy,
        "stderr": stderr,
        "n_examples": len(scores),
        "total_grader_calls": client.call_stats()["requests"],
        "by_theme": {t: _clipped_mean(v)[0] for t, v in sorted(by_theme.items())},
        "by_axis": {t: _clipped_mean(v)[0] for t, v in sorted(by_axis.items())},
        "rubric_items": len(jobs),
    }


def _scores(
    examples: Sequence[Example], met_of: Mapping[str, list[bool]]
) -> tuple[dict[str, float], dict[str, list[float]], dict[str, list[float]]]:
    """Each example's score, and the scores by theme (the example's tags) and by axis
    (the rubric items' tags)."""
    scores: dict[str, float] = {}
    by_theme: dict[str, list[float]] = {}
    by_axis: dict[str, list[float]] = {}
    for ex in examples:
        s = example_score(ex.rubrics, met_of[ex.uid])
        if s is None:
            continue
        scores[ex.uid] = s
        for tag in ex.tags:
            by_theme.setdefault(tag, []).append(s)
        for tag in sorted({t for item in ex.rubrics for t in item.tags}):
            idx = [k for k, item in enumerate(ex.rubrics) if tag in item.tags]
            sub = example_score([ex.rubrics[k] for k in idx], [met_of[ex.uid][k] for k in idx])
            if sub is not None:
                by_axis.setdefault(tag, []).append(sub)
    return scores, by_theme, by_axis
