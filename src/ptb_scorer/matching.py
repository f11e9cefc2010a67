"""Exact numeric answer matching, for gsm8k and the AIME tasks.

inspect's ``match(numeric=True)`` takes the last number of the answer (its own word
split and number parsing) and, at the pinned 0.3.285, compares values after rounding both
to 5 significant digits (``format(x, ".5g")``): 123457 matches a target of 123456, and
1000001 one of 1000000. Older inspect compared the strings with ``endswith`` (711 matched
11: PostTrainBench's issue #44, fixed upstream by its own exact match). Here the number is
the one inspect picks, and the comparison is exact: both sides as decimals (``Decimal`` of
the cleaned text, so 12.0 equals 12, 1,000 equals 1000, -3 differs from 3); a form only
inspect's parser reads (a vulgar fraction, a fullwidth digit) compares as its float.

:data:`PROBES` are near misses with the verdict this matcher must give. Each scoring run
replays them (:func:`describe`) and metrics.json names the matcher and any probe it now
decides otherwise, so an upgrade of the inspect pin that changes matching shows there.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

MATCHER = "last_number_exact/v1"

#: (answer, target, must match): near misses of the numeric match, each way
PROBES: tuple[tuple[str, str, bool], ...] = (
    ("ANSWER: 711", "11", False),
    ("ANSWER: 11", "711", False),
    ("ANSWER: -3", "3", False),
    ("ANSWER: 3", "-3", False),
    ("ANSWER: 1,000", "1000", True),
    ("ANSWER: 1000", "1,000", True),
    ("ANSWER: 12.0", "12", True),
    ("ANSWER: 12", "12.00", True),
    ("ANSWER: 123457", "123456", False),
    ("ANSWER: 1000001", "1000000", False),
    ("ANSWER: 3.14159", "3.141592", False),
    ("ANSWER: 0.30000000000000004", "0.3", False),
    ("ANSWER: 149", "49", False),
    ("ANSWER: 025", "25", True),
    ("ANSWER: $1,000.", "1000", True),
    ("ANSWER: 50 or 60", "50", False),
    ("ANSWER: 12 apples", "12", True),
    ("ANSWER: twelve", "12", False),
    ("", "12", False),
)


def _cleaned(text: str) -> str:
    from inspect_ai._util.text import strip_numeric_punctuation

    return strip_numeric_punctuation(text.strip().casefold())


def _value(word: str) -> Fraction | None:
    """The exact value of one number word (inspect's punctuation trim first)."""
    from inspect_ai.scorer._common import _clean_numeric_word, _parse_number

    try:
        d = Decimal(_clean_numeric_word(word))
        if d.is_finite():
            return Fraction(d)
    except InvalidOperation:
        pass
    as_float = _parse_number(word)  # unicode forms inspect reads (½, fullwidth digits)
    return Fraction(as_float) if as_float is not None else None


def exact_number(value: str, target: str) -> tuple[str, bool]:
    """(the answer inspect's numeric match extracts, whether it equals the target exactly):
    the last number of ``value``, compared by exact value. A target that is no number
    falls back to inspect's own match."""
    from inspect_ai.scorer._common import _is_number, match_str

    t = _cleaned(target)
    if not _is_number(t):
        return match_str(value, target, location="end", numeric=True)
    words = re.split(r"\s+", _cleaned(value))
    number = next((w for w in reversed(words) if _is_number(w)), None)
    if number is None:
        return value.strip(), False
    got, want = _value(number), _value(t)
    return number, got is not None and got == want


def exact_numeric_match() -> Any:
    """gsm8k's scorer: inspect's ``match(numeric=True)`` with the comparison made exact."""
    from inspect_ai.scorer import accuracy, scorer, stderr
    from inspect_ai.scorer._common import str_match_scorer

    @scorer(metrics=[accuracy(), stderr()])
    def exact_match() -> Any:
        return str_match_scorer(exact_number)

    return exact_match()


def aime_exact() -> Any:
    """inspect_evals' AIME scorer (the last substantive line, ``\\boxed{}`` removed) with
    the comparison made exact."""
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer, stderr
    from inspect_ai.solver import TaskState
    from inspect_evals.utils.aime_common import _find_last_substantive_line, remove_boxed_from_ans

    @scorer(metrics=[accuracy(), stderr()])
    def aime_exact_scorer() -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            raw = state.output.completion
            if not raw.strip():
                return Score(value=INCORRECT, explanation="Model produced empty completion")
            cleaned = remove_boxed_from_ans(_find_last_substantive_line(raw))
            answer, correct = exact_number(cleaned, target.text)
            return Score(
                value=CORRECT if correct else INCORRECT,
                answer=answer,
                explanation=raw,
                metadata={"cleaned_answer": cleaned},
            )

        return score

    return aime_exact_scorer()


def describe() -> dict[str, Any]:
    """What metrics.json records of the matcher: its name and the probes it now decides
    otherwise than :data:`PROBES` says (empty while matching is as tested)."""
    off = [f"{v!r} vs {t!r}" for v, t, want in PROBES if exact_number(v, t)[1] is not want]
    return {"matcher": {"name": MATCHER, "probes": len(PROBES), "probes_disagreeing": off}}
