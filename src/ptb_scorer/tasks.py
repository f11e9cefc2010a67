"""The benchmarks as inspect Tasks, built on inspect_evals at the pinned version.

gsm8k, aime2025 and aime2026 are inspect_evals' own tasks, scored by our exact numeric
matcher (:mod:`ptb_scorer.matching`: inspect's extraction, compared by exact value).
humaneval is inspect_evals' task with its check proxied (:mod:`ptb_scorer.proxied_check`:
the tests in a checker process, the model's code in a contained answer process) instead
of one program in a docker or unsandboxed "local" sandbox. gpqamain is our own Task (inspect_evals ships only
gpqa_diamond, from a CSV): upstream PostTrainBench's gated HF ``Idavidrein/gpqa``
gpqa_main, multiple choice with chain of thought, choices shuffled with a fixed seed (the
run seed in a seeded final evaluation, as upstream v1.2's: each seed is another order).
bfcl is inspect_evals' bfcl on the ``exec_simple`` category with native tool calling
(its info.json's ``chat_template.tool_calling``);
at the pinned version its exec categories are scored by matching the call's arguments
(their ground truth is parsed into AST form), so no model-written code runs there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: how humaneval decides a sample (ptb_scorer.proxied_check), recorded in metrics.json
HUMANEVAL_CHECK = "proxied/v1: checker process + one answer process per sample, plain values only"
#: gpqamain's choice shuffle seed (inspect_evals' gpqa default), recorded in metrics.json
GPQA_SHUFFLE_SEED = 42


@dataclass(frozen=True)
class TaskDef:
    make: Callable[[], Any]
    #: recorded in metrics.json next to the scores
    settings: dict[str, Any] = field(default_factory=dict)
    #: more to record, computed when the task is scored (the matcher's probes)
    describe: Callable[[], dict[str, Any]] | None = None
    #: the task with its data fixed by a run seed (gpqamain's choice order), for the
    #: tasks whose seed is more than the sampling's; and what it records then
    make_seeded: Callable[[int], Any] | None = None
    seeded_settings: dict[str, Any] = field(default_factory=dict)

    def build(self, run_seed: int | None = None) -> Any:
        """The inspect Task (``run_seed``: the final evaluation's seed, or None)."""
        if run_seed is not None and self.make_seeded is not None:
            return self.make_seeded(run_seed)
        return self.make()

    def record(self, run_seed: int | None = None) -> dict[str, Any]:
        """What metrics.json records of the task's settings."""
        settings = {**self.settings, **(self.seeded_settings if run_seed is not None else {})}
        return {**settings, **(self.describe() if self.describe else {})}


def _exact(task: Any, scorer: Any) -> Any:
    """inspect_evals' task, scored by our exact matcher (ptb_scorer.matching) instead."""
    from inspect_ai import task_with

    return task_with(task, scorer=scorer)


def _gsm8k() -> Any:
    from inspect_evals.gsm8k import gsm8k

    from ptb_scorer.matching import exact_numeric_match

    return _exact(gsm8k(), exact_numeric_match())


def _aime2025() -> Any:
    from inspect_evals.aime2025 import aime2025

    from ptb_scorer.matching import aime_exact

    return _exact(aime2025(), aime_exact())


def _aime2026() -> Any:
    from inspect_evals.aime2026 import aime2026

    from ptb_scorer.matching import aime_exact

    return _exact(aime2026(), aime_exact())


def _matcher() -> dict[str, Any]:
    from ptb_scorer.matching import describe

    return describe()


def contained_verify(limits: Any = None) -> Any:
    """humaneval's check(entry_point), with the model's code apart from the tests
    (:mod:`ptb_scorer.proxied_check`): a sample passes only on the checker's verdict."""
    import anyio
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer, stderr
    from inspect_ai.solver import TaskState
    from inspect_evals.humaneval.humaneval import find_code

    from ptb_scorer.contained import Limits
    from ptb_scorer.proxied_check import check

    limits = limits or Limits()

    @scorer(metrics=[accuracy(), stderr()])
    def verify_contained() -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            answer = find_code(state.output.completion)
            meta = state.metadata
            res = await anyio.to_thread.run_sync(
                check, meta["prompt"], answer, meta["test"], meta["entry_point"], limits
            )
            return Score(
                value=CORRECT if res.passed else INCORRECT,
                answer=answer,
                explanation=res.explanation[-4000:],
                metadata={
                    "reason": res.reason,
                    "calls": res.calls,
                    "duration_s": res.duration_s,
                    "contained": res.applied,
                },
            )

        return score

    return verify_contained()


def _humaneval() -> Any:
    from inspect_evals.humaneval import humaneval

    return humaneval(scorer=contained_verify(), sandbox=None)  # type: ignore[arg-type]


def gpqamain_task(shuffle_seed: int = GPQA_SHUFFLE_SEED) -> Any:
    from inspect_ai import Task
    from inspect_ai.dataset import hf_dataset
    from inspect_ai.scorer import choice
    from inspect_ai.solver import multiple_choice
    from inspect_evals.gpqa.gpqa import record_to_sample

    dataset = hf_dataset(
        path="Idavidrein/gpqa",
        name="gpqa_main",
        split="train",  # the only split
        sample_fields=record_to_sample,  # the correct answer is listed first ...
        shuffle_choices=shuffle_seed,  # ... so choices are shuffled, with a fixed seed
    )
    return Task(dataset=dataset, solver=multiple_choice(cot=True), scorer=choice(), name="gpqamain")


def _bfcl() -> Any:
    from inspect_evals.bfcl import bfcl

    return bfcl(categories="exec_simple")


TASKS: dict[str, TaskDef] = {
    "gsm8k": TaskDef(_gsm8k, settings={"fewshot": 10}, describe=_matcher),
    "humaneval": TaskDef(_humaneval, settings={"humaneval_check": HUMANEVAL_CHECK}),
    "aime2025": TaskDef(_aime2025, describe=_matcher),
    # AIME 2026 (inspect_evals' task, math-ai/aime26): in no v1.2 average, weighted nowhere by default
    "aime2026": TaskDef(_aime2026, describe=_matcher),
    "gpqamain": TaskDef(
        gpqamain_task,
        settings={"shuffle_seed": GPQA_SHUFFLE_SEED, "cot": True},
        # a seed's choice order is its own (a number here would be averaged over the seeds)
        make_seeded=gpqamain_task,
        seeded_settings={"shuffle_seed": "the run seed"},
    ),
    "bfcl": TaskDef(_bfcl, settings={"categories": ["exec_simple"]}),
}
