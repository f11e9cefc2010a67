"""The tasks' real scorers (as the tasks build them, on the fixture data) against hand cases."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from scorer_env import hf_home


def state_for(sample: Any, completion: str = "", tool_calls: list | None = None) -> Any:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput
    from inspect_ai.scorer import Target
    from inspect_ai.solver import TaskState

    output = ModelOutput.from_content("test", completion)
    if tool_calls is not None:
        output.choices[0].message = ChatMessageAssistant(content=completion, tool_calls=tool_calls)
    st = TaskState(
        model="test/test",
        sample_id=sample.id,
        epoch=1,
        input=sample.input,
        messages=[ChatMessageUser(content=sample.input)] if isinstance(sample.input, str) else list(sample.input),
        target=Target(sample.target),
        choices=sample.choices,
        output=output,
        metadata=sample.metadata or {},
    )
    st.messages.append(output.message)
    return st


def score(task: Any, state: Any) -> Any:
    scorer = task.scorer[0] if isinstance(task.scorer, list) else task.scorer
    return asyncio.run(scorer(state, state.target))


def correct(task: Any, sample: Any, completion: str, **kw: Any) -> bool:
    return score(task, state_for(sample, completion, **kw)).value == "C"


@pytest.fixture(scope="module")
def tasks(hf_home):
    from ptb_scorer.tasks import TASKS

    return {name: d.build() for name, d in TASKS.items()}


# -- gsm8k: targets are 3,600 / -3 / 3.5 (answers after '####', commas in the data) --------
GSM8K = [
    (0, "1,200 pens times 3 days.\nANSWER: 3,600", True),  # commas on both sides
    (0, "ANSWER: 3600", True),
    (0, "#### 3600", True),  # the dataset's own answer marker
    (0, "First 1,200, then 2,400, finally 3,600", True),  # several numbers: the last counts
    (0, "ANSWER: 3600 pens, or 1,200 a day", False),  # ... so a trailing number wins
    (1, "5 - 8 gives\nANSWER: -3", True),  # negative
    (1, "ANSWER: 3", False),
    (2, "ANSWER: 3.5", True),  # decimal
    (2, "ANSWER: 3.50", True),
    (2, "ANSWER: 35", False),
    (0, "I do not know", False),
]


@pytest.mark.parametrize(("i", "completion", "expected"), GSM8K)
def test_gsm8k_answers(tasks, i, completion, expected):
    task = tasks["gsm8k"]
    sample = task.dataset[i]
    assert correct(task, sample, completion) is expected


def test_gsm8k_targets_come_from_after_the_marker(tasks):
    assert [s.target for s in tasks["gsm8k"].dataset] == ["3,600", "-3", "3.5"]


# -- aime2025: integer answers; targets 25 and 42 --------------------------------------------
AIME = [
    (0, "ANSWER: 25", True),
    (0, "ANSWER: 025", True),  # leading zero (AIME answers are written 000-999)
    (0, "so the remainder is\n\\boxed{25}", True),  # boxed
    (0, "ANSWER: \\boxed{025}", True),
    (0, "$$\n\\boxed{25}\n$$", True),  # boxed inside display math, trailing delimiter line
    (0, "ANSWER: 250", False),
    (1, "6 * 7 = 42\nANSWER: 42", True),
    (1, "", False),
]


@pytest.mark.parametrize(("i", "completion", "expected"), AIME)
def test_aime_answers(tasks, i, completion, expected):
    task = tasks["aime2025"]
    assert correct(task, task.dataset[i], completion) is expected


# -- exact numeric matching: near misses on the real task scorers ---------------------------
def verdict(task: Any, completion: str, target: str) -> bool:
    """The task's own scorer on a completion, against ``target`` (the first fixture
    sample, its target replaced)."""
    from inspect_ai.scorer import Target

    scorer = task.scorer[0] if isinstance(task.scorer, list) else task.scorer
    return asyncio.run(scorer(state_for(task.dataset[0], completion), Target(target))).value == "C"


# (completion, target, correct?): the pinned inspect's match rounds to 5 significant
# digits (123457 == 123456) and older inspect compared with endswith (711 == 11)
NEAR_MISS = [
    ("ANSWER: 711", "11", False),
    ("ANSWER: 11", "711", False),
    ("ANSWER: 149", "49", False),
    ("ANSWER: -3", "3", False),
    ("ANSWER: 3", "-3", False),
    ("ANSWER: -3", "-3", True),
    ("ANSWER: 1,000", "1000", True),
    ("ANSWER: 1000", "1,000", True),
    ("ANSWER: 10,000", "1000", False),
    ("ANSWER: 12.0", "12", True),
    ("ANSWER: 12", "12.00", True),
    ("ANSWER: 12.5", "12", False),
    ("ANSWER: 123457", "123456", False),  # the pinned inspect says CORRECT
    ("ANSWER: 1000001", "1000000", False),  # the pinned inspect says CORRECT
    ("ANSWER: 3.14159", "3.141592", False),  # the pinned inspect says CORRECT
    ("ANSWER: 0.30000000000000004", "0.3", False),
    ("ANSWER: $1,000.", "1000", True),
    ("711 is what I first thought; the answer is 11", "11", True),  # the last number counts
    ("the answer is 11, not 711", "11", False),
    ("ANSWER: eleven", "11", False),
]
AIME_ONLY = [
    ("so the answer is\n\\boxed{711}", "11", False),
    ("ANSWER: \\boxed{011}", "11", True),
    ("$$\n\\boxed{-3}\n$$", "3", False),
]


@pytest.mark.parametrize("task_name", ["gsm8k", "aime2025", "aime2026"])
@pytest.mark.parametrize(("completion", "target", "expected"), NEAR_MISS)
def test_numeric_answers_match_exactly(tasks, task_name, completion, target, expected):
    assert verdict(tasks[task_name], completion, target) is expected


@pytest.mark.parametrize("task_name", ["aime2025", "aime2026"])
@pytest.mark.parametrize(("completion", "target", "expected"), AIME_ONLY)
def test_aime_boxed_answers_match_exactly(tasks, task_name, completion, target, expected):
    assert verdict(tasks[task_name], completion, target) is expected


def test_the_matcher_decides_its_probes_as_tested():
    """metrics.json's `matcher` (name, probes decided otherwise) is this table's verdict at
    scoring time: a pin upgrade that changes matching names the probes it changed."""
    from ptb_scorer.matching import MATCHER, PROBES, describe, exact_number

    assert describe() == {"matcher": {"name": MATCHER, "probes": len(PROBES), "probes_disagreeing": []}}
    assert [exact_number(v, t)[1] for v, t, _ in PROBES] == [want for _, _, want in PROBES]


def test_aime2026_is_inspect_evals_task_on_its_own_data(tasks):
    task = tasks["aime2026"]
    assert [s.target for s in task.dataset] == ["26", "729"]
    assert correct(task, task.dataset[1], "27 * 27 = 729\nANSWER: 729")
    assert not correct(task, task.dataset[1], "ANSWER: 29")


# -- gpqamain: shuffled choices with a fixed seed --------------------------------------------
def test_gpqa_choices_are_shuffled_and_the_target_follows_the_correct_answer(tasks):
    from ptb_scorer.tasks import gpqamain_task

    task = tasks["gpqamain"]
    correct_answers = ["electron", "positron", "proton"]
    letters = []
    for sample, answer in zip(task.dataset, correct_answers, strict=True):
        idx = ord(sample.target) - ord("A")
        assert sample.choices[idx] == answer  # the target letter names the correct answer
        letters.append(sample.target)
    assert letters != ["A", "A", "A"]  # raw data lists the correct answer first
    # the seed fixes the order: a second build presents the same exam
    again = gpqamain_task()
    assert [s.choices for s in again.dataset] == [s.choices for s in task.dataset]


def _gpqa_answer(task: Any, sample: Any, completion: str) -> str:
    """Run the task's own solver (multiple_choice, cot) and scorer (choice) on a completion."""
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Target

    async def generate(state, **kw):
        state.output = ModelOutput.from_content("test", completion)
        state.messages.append(state.output.message)
        return state

    async def run():
        st = state_for(sample)
        solver = task.solver[0] if isinstance(task.solver, list) else task.solver
        st = await solver(st, generate)
        scorer = task.scorer[0] if isinstance(task.scorer, list) else task.scorer
        return (await scorer(st, Target(sample.target))).value

    return asyncio.run(run())


def test_gpqa_letters(tasks):
    task = tasks["gpqamain"]
    sample = task.dataset[0]
    wrong = next(chr(65 + i) for i in range(4) if chr(65 + i) != sample.target)
    assert _gpqa_answer(task, sample, f"Reasoning...\nANSWER: {sample.target}") == "C"
    assert _gpqa_answer(task, sample, f"ANSWER: {wrong}") == "I"
    assert _gpqa_answer(task, sample, "no letter at all") == "I"


# -- humaneval: the contained check ----------------------------------------------------------
HUMANEVAL = {
    "correct": ("```python\ndef add(a: int, b: int) -> int:\n    return a + b\n```", True),
    "body only": ("    return a + b\n", True),
    "wrong": ("    return a - b\n", False),
    "syntax error": ("    return a +\n", False),
    "infinite loop": ("    while True:\n        pass\n", False),
    "fork bomb": ("    import os\n    while True:\n        os.fork()\n", False),
    "10 GB allocation": ("    x = bytearray(10 * 1024 ** 3)\n    return a + b\n", False),
}


@pytest.mark.parametrize("case", HUMANEVAL)
def test_humaneval_contained(tasks, case):
    from ptb_scorer.contained import Limits
    from ptb_scorer.tasks import contained_verify

    # the task's own check (prompt + completion + tests + check()), with a 3 s timeout
    # instead of the task's 30 s
    scorer = contained_verify(Limits(timeout_s=3, cpu_seconds=3))
    sample = tasks["humaneval"].dataset[0]
    completion, expected = HUMANEVAL[case]
    st = state_for(sample, completion)
    result = asyncio.run(scorer(st, st.target))
    assert (result.value == "C") is expected, result.explanation
    assert result.metadata["contained"]  # what applied (network, uid) is on record


def test_humaneval_task_scores_with_the_contained_check(tasks):
    task = tasks["humaneval"]
    assert task.sandbox is None  # no docker, no unsandboxed "local" exec
    assert correct(task, task.dataset[1], "    return n % 2 == 0\n")
    assert not correct(task, task.dataset[1], "    return True\n")


# -- bfcl exec_simple: the call's arguments ---------------------------------------------------
def _call(function: str, **arguments: Any) -> Any:
    from inspect_ai.tool import ToolCall

    return ToolCall(id="c1", function=function, arguments=arguments, type="function")


BFCL = [
    (0, [_call("calc_binomial_probability", n=20, k=5, p=0.5)], True),
    (0, [_call("calc_binomial_probability", k=5, n=20, p=0.5)], True),  # order does not matter
    (0, [_call("calc_binomial_probability", n=20, k=5, p=0.6)], False),  # wrong value
    (0, [_call("calc_binomial_probability", n=20, k=5)], False),  # a required argument missing
    (0, [_call("binomial", n=20, k=5, p=0.5)], False),  # wrong function
    (0, [], False),  # no call
    (1, [_call("convert_currency", amount=100.0, from_currency="USD", to_currency="EUR")], True),
    (1, [_call("convert_currency", amount=100.0, from_currency="EUR", to_currency="USD")], False),
]


@pytest.mark.parametrize(("i", "calls", "expected"), BFCL)
def test_bfcl_argument_matching(tasks, i, calls, expected):
    task = tasks["bfcl"]
    sample = task.dataset[i]
    result = score(task, state_for(sample, "", tool_calls=calls))
    assert (result.value in ("C", 1, 1.0, True)) is expected, result.explanation
