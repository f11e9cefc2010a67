"""The graded tasks' evaluate.py: the candidate model answers (inspect_ai on vLLM or
transformers, as every task), then a grader model grades the answers
(:mod:`ptb_scorer.arena` pairwise against baseline answers, :mod:`ptb_scorer.rubric`
against each example's rubric) through :mod:`ptb_scorer.llm_client`.

    python evaluate.py [--model-path DIR] [--json-output-file FILE] [--limit N (-1 = all; default 32)]
                       [--max-new-tokens N] [--backend auto|vllm|hf] [--base-architecture ARCH]
                       [--chat-template FILE | --chat-template-from DIR] [--prompt-log FILE]

The grader's endpoint comes from the harness (``PTB_GRADER``, the key in the variable it
names), only in the evaluate stage: an agent running evaluate.py has no grader and is
told so. Failures print one line: ``PTB_MODEL_INVALID: why`` (exit 3, the model's fault),
``PTB_GRADER_FAILED: why`` (exit 4: the grader did not answer, an infrastructure
failure, never a score), ``PTB_SCORER_ERROR: why`` (exit 2 data missing, 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptb_scorer import arena, data, rubric
from ptb_scorer.llm_client import Endpoint, LLMClient, LLMUnavailable
from ptb_scorer.model import check_loadable, check_model
from ptb_scorer.task_info import Scoring, TaskInfo, attempt_record, engine_for

#: the seed of the question order (upstream shuffles with 42 before taking --limit)
QUESTION_SEED = 42
_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.S)


def file_path(spec: dict[str, Any]) -> Path:
    """Where a `file` dataset of info.json lies in the HF home (ptb-harness prefetch puts it there)."""
    return data.CacheLayout.from_env().hf_home / spec["path"]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# -- the tasks ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Item:
    uid: str
    conversation: list[dict[str, str]]
    payload: Any


def arena_items(files: dict[str, Path]) -> list[Item]:
    """Creative-writing questions with the baseline model's answers."""
    baseline = {r["uid"]: r for r in read_jsonl(files["baseline"])}
    items = []
    for q in read_jsonl(files["questions"]):
        if q.get("category", "creative_writing") != "creative_writing" or q["uid"] not in baseline:
            continue
        answer = baseline[q["uid"]]["messages"][-1]["content"]
        answer = answer.get("answer", "") if isinstance(answer, dict) else str(answer)
        items.append(
            Item(q["uid"], [{"role": "user", "content": q["prompt"]}], arena.Question(q["uid"], q["prompt"], answer))
        )
    return items


def healthbench_items(files: dict[str, Path]) -> list[Item]:
    items = []
    for rec in read_jsonl(files["examples"]):
        ex = rubric.Example.from_record(rec)
        items.append(Item(ex.uid, list(ex.conversation), ex))
    return items


@dataclass(frozen=True)
class GradedDef:
    items: Callable[[dict[str, Path]], list[Item]]
    grade: Callable[[LLMClient, list[Item], dict[str, str]], dict[str, Any]]
    settings: dict[str, Any]


def _grade_arena(client: LLMClient, items: list[Item], answers: dict[str, str]) -> dict[str, Any]:
    return arena.grade(client, [i.payload for i in items], answers, max_tokens=8192)


def _grade_healthbench(client: LLMClient, items: list[Item], answers: dict[str, str]) -> dict[str, Any]:
    return rubric.grade(client, [i.payload for i in items], answers, max_tokens=2048)


GRADED: dict[str, GradedDef] = {
    "arenahardwriting": GradedDef(arena_items, _grade_arena, {"pairwise": "both orders", "strong_weight": 3}),
    "healthbench": GradedDef(healthbench_items, _grade_healthbench, {"grading": "rubric"}),
}


# -- the candidate's answers --------------------------------------------------------------------
def answers_task(items: list[Item]) -> Any:
    """The inspect Task in which the candidate answers every item (its conversation)."""
    from inspect_ai import Task
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser
    from inspect_ai.scorer import Score, Target, accuracy, scorer
    from inspect_ai.solver import TaskState
    from inspect_ai.solver import generate as generate_solver

    kinds = {"user": ChatMessageUser, "assistant": ChatMessageAssistant, "system": ChatMessageSystem}

    @scorer(metrics=[accuracy()])
    def answered() -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            return Score(value=1 if state.output.completion.strip() else 0)

        return score

    samples = [Sample(id=i.uid, input=[kinds[m["role"]](content=m["content"]) for m in i.conversation]) for i in items]
    return Task(dataset=MemoryDataset(samples), solver=generate_solver(), scorer=answered(), name="answers")


def generate(spec: Any, items: list[Item], model: Any = None, run_seed: int | None = None) -> dict[str, str]:
    """The model's answer to every item (uid -> text; a leading <think> block removed), on
    ``model`` (ptb_scorer.engine.load_model; None: inspect loads one), each request seeded
    from ``run_seed`` when given."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.log import read_eval_log

    from ptb_scorer import engine

    engine.register(spec)
    task = answers_task(items)
    logs = inspect_eval(
        task,
        model=spec.model if model is None else model,
        model_args=spec.model_args if model is None else {},
        solver=None if run_seed is None else engine.seeded(task.solver, run_seed),
        log_dir=tempfile.mkdtemp(prefix="ptb-inspect-logs-"),
        log_format="json",
        display="plain",
        fail_on_error=True,
        retry_on_error=0,
        **spec.generate,
    )
    log = logs[0]
    if log.status != "success":
        err = log.error.message.strip().splitlines()[-1][:300] if log.error else "no error recorded"
        raise engine.EngineFailed(f"inspect eval ended with status {log.status!r}: {err}")
    full = read_eval_log(log.location)
    answers = {str(s.id): _THINK.sub("", s.output.completion) for s in full.samples or []}
    missing = [i.uid for i in items if i.uid not in answers]
    if missing:
        raise engine.EngineFailed(f"no answer for {len(missing)} item(s), e.g. {missing[0]}")
    return answers


# -- the scoring -------------------------------------------------------------------------------
def prepare(name: str, info: TaskInfo, args: argparse.Namespace) -> Scoring:
    """A graded task's scoring (ptb_scorer.cli.main runs it for a task whose info.json has
    uses_grader): the grader there, the model checked, the questions chosen."""
    graded = GRADED[name]
    # the grader first: an agent (or a harness without one) learns it before any GPU work
    endpoint = Endpoint.from_environ()
    if endpoint is None:
        raise LLMUnavailable(
            "no grader endpoint (PTB_GRADER is unset): graded tasks are scored in the harness's evaluate stage, "
            "which hands the scorer the campaign's grader"
        )
    checked = check_model(Path(args.model_path), args.base_architecture)
    check_loadable(checked.path)
    data.require(info.datasets)
    files = {d["role"]: file_path(d) for d in info.datasets if d["kind"] == "file"}
    items = graded.items(files)
    random.Random(QUESTION_SEED).shuffle(items)
    if args.limit >= 0:
        items = items[: args.limit]
    chosen = engine_for(args, info, checked, args.max_new_tokens)
    record = {**attempt_record(name, info, args, checked, chosen), "question_seed": QUESTION_SEED}
    record.update(graded.settings)

    def score(model: Any, run_seed: int | None) -> dict[str, Any]:
        answers = generate(chosen.spec, items, model, run_seed)
        with LLMClient(endpoint) as client:
            try:
                metrics = graded.grade(client, items, answers)
            finally:
                usage = client.call_stats()
                print(f"{name}: grader {usage['requests']} requests, {usage['retries']} retries", flush=True)
        return {**metrics, "grader": usage}

    return Scoring(record, chosen.spec, score)
