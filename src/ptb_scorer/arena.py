"""Pairwise grading as in Arena-Hard (creative writing): the grader compares the
candidate's answer with a baseline answer, in both orders (the position of an answer
biases graders), and says which is better and how strongly.

Verdict labels: ``A>>B``, ``A>B``, ``A=B``, ``B>A``, ``B>>A`` (the last ``[[...]]`` in
the grader's answer). Each game gives the candidate a value (win 1, tie 0.5, loss 0)
and a weight (a strong verdict ``>>`` counts ``strong_weight`` times, 3 as in
Arena-Hard; 1 otherwise). A question's score is the weighted mean of its two games; the
accuracy is the mean over questions (the candidate's win rate against the baseline),
with its standard error. A question with an unparsable game is left out and counted.

Standard library only, plus the grader client (ptb_scorer.llm_client).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ptb_scorer.llm_client import LLMClient, LLMUnavailable

STRONG_WEIGHT = 3
_LABEL = re.compile(r"\[\[\s*(A\s*>>\s*B|A\s*>\s*B|A\s*=\s*B|B\s*>\s*A|B\s*>>\s*A)\s*\]\]")

SYSTEM_PROMPT = """You are an impartial judge of two AI assistants' answers to the same user
request, a piece of creative writing. First write your own short answer to the request,
then compare both assistants' answers with it and with each other: how well each follows
the request, its creativity, style, coherence and language. Do not let the order of the
answers, their length or the assistants' names sway you.

End with exactly one verdict label:
[[A>>B]] Assistant A is much better; [[A>B]] A is better; [[A=B]] a tie;
[[B>A]] B is better; [[B>>A]] B is much better."""

USER_TEMPLATE = """<|User Prompt|>
{question}

<|The Start of Assistant A's Answer|>
{answer_a}
<|The End of Assistant A's Answer|>

<|The Start of Assistant B's Answer|>
{answer_b}
<|The End of Assistant B's Answer|>"""


def parse_label(text: str) -> str | None:
    """The last verdict label of a grader's answer, normalised ('A>B'), or None."""
    found = _LABEL.findall(text.upper())
    return re.sub(r"\s+", "", found[-1]) if found else None


def candidate_value(label: str, candidate_is: str) -> tuple[float, int]:
    """(value for the candidate, weight) of one game's label; candidate_is 'A' or 'B'."""
    if label == "A=B":
        return 0.5, 1
    value = 1.0 if label[0] == candidate_is else 0.0
    return value, STRONG_WEIGHT if ">>" in label else 1


@dataclass(frozen=True)
class Question:
    uid: str
    prompt: str
    baseline_answer: str
    category: str = "creative_writing"


def games(q: Question, answer: str) -> list[tuple[str, list[dict[str, str]]]]:
    """The two games of a question: (where the candidate is, messages)."""
    out = []
    for candidate_is, a, b in (("B", q.baseline_answer, answer), ("A", answer, q.baseline_answer)):
        user = USER_TEMPLATE.format(question=q.prompt, answer_a=a, answer_b=b)
        out.append((candidate_is, [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]))
    return out


def grade(client: LLMClient, questions: Sequence[Question], answers: Mapping[str, str], max_tokens: int) -> dict:
    """Grade every (question, answer) in both orders; the metrics (see module doc).
    Raises LLMUnavailable when the grader cannot answer."""
    jobs = [(q, side, msgs) for q in questions for side, msgs in games(q, answers[q.uid])]
    replies = client.map(lambda job: client.chat(job[2], max_tokens=max_tokens), jobs)
    per_question: dict[str, list[tuple[float, int] | None]] = {}
    labels: Counter = Counter()
    for (q, side, _msgs), reply in zip(jobs, replies, strict=True):
        label = parse_label(reply)
        labels[label or "unparsed"] += 1
        per_question.setdefault(q.uid, []).append(candidate_value(label, side) if label else None)
    scores = []
    for results in per_question.values():
        if any(r is None for r in results):
            continue
        total_w = sum(w for _, w in results)
        scores.append(sum(v * w for v, w in results) / total_w)
    if questions and not scores:
        raise LLMUnavailable(f"no question got two verdicts the grader's answers could be parsed into ({dict(labels)})")
    return summarize(scores, len(questions), labels)


def summarize(scores: Sequence[float], n_questions: int, labels: Mapping[str, int]) -> dict[str, Any]:
    n = len(scores)
    acc = sum(scores) / n if n else 0.0
    stderr = math.sqrt(sum((s - acc) ** 2 for s in scores) / (n - 1) / n) if n > 1 else 0.0
    return {
        "accuracy": acc,
        "stderr": stderr,
        "n_examples": n,
        "n_questions": n_questions,
        "questions_left_out": n_questions - n,
        "verdicts": dict(sorted(labels.items())),
        "strong_weight": STRONG_WEIGHT,
    }
