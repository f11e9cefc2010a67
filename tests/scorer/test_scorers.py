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
