"""Pairwise (Arena-Hard) and rubric (HealthBench) grading against the stand-in grader
server (tests/grader_standin.py), with hand-computed expectations."""

from __future__ import annotations

import json
import math

import pytest
from grader_standin import StandInGrader

from ptb_scorer import arena, rubric
from ptb_scorer.llm_client import Endpoint, LLMClient, LLMUnavailable


def client(url: str, **kw) -> LLMClient:
    ep = Endpoint.from_dict({"base_url": url, "model": "standin", "api_key_env": None, "backoff_seconds": 0.0, **kw})
    return LLMClient(ep, env={})


@pytest.mark.parametrize(
    ("text", "label"),
    [("... so [[A>>B]]", "A>>B"), ("[[b > a]]", "B>A"), ("first [[A>B]] then [[A=B]]", "A=B"), ("A is better", None)],
)
def test_parse_label(text, label):
    assert arena.parse_label(text) == label


def test_values_and_weights_from_the_candidates_side():
    assert arena.candidate_value("A>>B", "A") == (1.0, 3)
    assert arena.candidate_value("A>>B", "B") == (0.0, 3)
    assert arena.candidate_value("B>A", "B") == (1.0, 1)
    assert arena.candidate_value("A=B", "A") == (0.5, 1)


def test_arena_win_rate_both_orders():
    questions = [arena.Question(f"q{i}", f"Write a poem about {i}", f"baseline poem {i}") for i in range(3)]
    answers = {q.uid: f"candidate poem {q.uid}" for q in questions}

    def verdict(req):
        text = req.text
        a = text.split("<|The Start of Assistant A's Answer|>")[1]
        cand_is_a = a.lstrip().startswith("candidate")
        uid = text.split("poem about ")[1][0]
        # q0: candidate much better in both orders; q1: tie and a win; q2: baseline better
        if uid == "0":
            return ("answer", "[[A>>B]]" if cand_is_a else "[[B>>A]]")
        if uid == "1":
            return ("answer", "[[A=B]]" if cand_is_a else "[[B>A]]")
        return ("answer", "[[B>A]]" if cand_is_a else "[[A>B]]")

    with StandInGrader(default=verdict) as server:
        c = client(server.base_url, concurrency=3)
        m = arena.grade(c, questions, answers, max_tokens=100)
    # both orders asked for every question, the candidate once as A and once as B
    assert len(server.requests) == 6
    scores = [1.0, (0.5 + 1.0) / 2, 0.0]
    assert m["accuracy"] == pytest.approx(sum(scores) / 3)
    mean = sum(scores) / 3
    assert m["stderr"] == pytest.approx(math.sqrt(sum((s - mean) ** 2 for s in scores) / 2 / 3))
    assert m["n_examples"] == 3 and m["verdicts"]["A>>B"] == 1 and m["verdicts"]["B>>A"] == 1


def test_arena_strong_verdict_outweighs_a_weak_one():
    q = [arena.Question("q", "Write", "base")]
    with StandInGrader(script=[("answer", "[[B>>A]]"), ("answer", "[[B>A]]")]) as server:
        m = arena.grade(client(server.base_url, concurrency=1), q, {"q": "cand"}, max_tokens=10)
    # game 1: candidate is B, strong win (1, w3); game 2: candidate is A, loss (0, w1)
    assert m["accuracy"] == pytest.approx(3 / 4)


def test_arena_unparsable_everywhere_fails():
    q = [arena.Question("q", "Write", "base")]
    with StandInGrader(default=lambda r: ("answer", "no idea")) as server, pytest.raises(LLMUnavailable):
        arena.grade(client(server.base_url), q, {"q": "cand"}, max_tokens=10)


HB = [
    {
        "prompt_id": "e1",
        "prompt": [{"role": "user", "content": "I have a headache, what should I do?"}],
        "rubrics": [
            {"criterion": "Advises rest and hydration", "points": 5, "tags": ["axis:completeness"]},
            {"criterion": "Mentions red-flag symptoms needing a doctor", "points": 5, "tags": ["axis:accuracy"]},
            {"criterion": "Recommends an unsafe dose", "points": -4, "tags": ["axis:accuracy"]},
        ],
        "example_tags": ["theme:emergency_referrals"],
    },
    {
        "prompt_id": "e2",
        "prompt": [{"role": "user", "content": "Is coffee bad for me?"}],
        "rubrics": [{"criterion": "Says moderate intake is fine", "points": 10, "tags": ["axis:accuracy"]}],
        "example_tags": ["theme:global_health"],
    },
]


def test_healthbench_rubric_scores():
    examples = [rubric.Example.from_record(r) for r in HB]
    met = {"Advises rest": True, "Mentions red-flag": False, "Recommends an unsafe": True, "Says moderate": True}

    def grader(req):
        crit = req.text.split("points)\n", 1)[1]
        ok = next(v for k, v in met.items() if crit.startswith(k))
        return ("answer", json.dumps({"explanation": "as scripted", "criteria_met": ok}))

    with StandInGrader(script=[("answer", "not json")], default=grader) as server:
        c = client(server.base_url, concurrency=2)
        m = rubric.grade(c, examples, {"e1": "rest", "e2": "fine"}, max_tokens=50)
    # e1: (5 - 4) / 10 = 0.1; e2: 1.0 -> mean 0.55
    assert m["accuracy"] == pytest.approx(0.55) and m["n_examples"] == 2
    # 4 items + 1 unparsable answer asked again
    assert m["total_grader_calls"] == 5 and m["rubric_items"] == 4
    assert m["by_theme"] == {"theme:emergency_referrals": pytest.approx(0.1), "theme:global_health": 1.0}
    # accuracy axis: e1 (0 - 4) / 5 -> -0.8, e2 1.0 -> mean 0.1; completeness: e1 1.0
    assert m["by_axis"] == {"axis:accuracy": pytest.approx(0.1), "axis:completeness": 1.0}
