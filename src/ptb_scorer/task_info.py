"""What the scorer reads of its task's info.json, once, and what an attempt runs with (the
chat template, the engine spec, the PTB_SCORER_INFO record that heads metrics.json)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptb_scorer import data
from ptb_scorer.chat_template import ChatTemplate, Source, TemplateError, choose, load_bundle
from ptb_scorer.model import CheckedModel
from ptb_scorer.seeds import is_greedy, model_temperature

if TYPE_CHECKING:  # engine imports inspect's pieces only when it runs
    from ptb_scorer.engine import EngineSpec


@dataclass(frozen=True)
class TaskInfo:
    """What the scorer reads of its task's info.json (once): the defaults of its command
    line, the datasets, and whether a grader model grades it."""

    default_limit: int
    default_max_tokens: int | None
    #: the flag of the token cap (evaluate.token_flag): the graded tasks' is
    #: --max-new-tokens, as upstream's
    cap_flag: str
    datasets: list[dict[str, Any]]
    uses_grader: bool
    #: info.json chat_template: the task needs native tool calls; its template variables
    tool_calling: bool = False
    template_kwargs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> TaskInfo:
        info = json.loads(path.read_text())
        evaluate = info.get("evaluate") or {}
        ladder = evaluate.get("ladder") or [{}]
        return cls(
            default_limit=info.get("agent_default_limit", -1),
            default_max_tokens=ladder[0].get("max_tokens"),
            cap_flag=evaluate.get("token_flag", "--max-tokens"),
            datasets=info.get("datasets", []),
            uses_grader=info.get("uses_grader") is True,
            tool_calling=(info.get("chat_template") or {}).get("tool_calling") is True,
            template_kwargs=dict((info.get("chat_template") or {}).get("kwargs") or {}),
        )

    @property
    def cap_name(self) -> str:
        """The token cap's name in the parsed arguments and the records (max_tokens, max_new_tokens)."""
        return self.cap_flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class EngineChoice:
    """How an attempt generates: the backend, the chat template, the engine spec, and the
    decoding the model's own generation config asks for."""

    backend: str
    template: ChatTemplate
    spec: EngineSpec
    #: {"temperature": the model's (None: unreadable), "greedy": below vLLM's sampling epsilon}
    decoding: dict[str, Any]
    #: the transformers backend's attention kernels in force ({"sdpa_kernels": [...]}); None on vLLM
    attention: dict[str, Any] | None = None


@dataclass(frozen=True)
class Scoring:
    """One attempt's scoring, settled before any model loads: what it runs with (the
    PTB_SCORER_INFO record, the head of every metrics file it writes), its engine, and
    how one run on the loaded model scores."""

    record: dict[str, Any]
    spec: EngineSpec
    #: (the loaded model, the run seed or None) -> that run's metrics (EngineFailed if it failed)
    score: Callable[[Any, int | None], dict[str, Any]]


def attempt_record(
    name: str, info: TaskInfo, args: argparse.Namespace, checked: CheckedModel, chosen: EngineChoice
) -> dict[str, Any]:
    """What an attempt runs with (PTB_SCORER_INFO, and the head of metrics.json)."""
    from ptb_scorer import engine

    versions = engine.versions()
    return {
        "task": name,
        info.cap_name: getattr(args, info.cap_name),
        "limit": args.limit,
        "engine": chosen.backend,
        "engine_version": versions.get("vllm" if chosen.backend == "vllm" else "transformers"),
        "versions": versions,
        "architecture": checked.architecture,
        "chat_template": chosen.template.record(),
        "decoding": chosen.decoding,
        "attention": chosen.attention,
        "datasets": [data.revision(d) for d in info.datasets],
    }


def task_template(args: argparse.Namespace, info: TaskInfo, checked: CheckedModel) -> ChatTemplate:
    """The chat template of this run: the harness's bundle (--chat-template, by default
    ptb_chat_template.json beside evaluate.py), or a model directory's own template
    (--chat-template-from, for runs by hand)."""
    if args.chat_template_from is None:
        return load_bundle(args.chat_template)
    source = Source(args.chat_template_from, str(args.chat_template_from))
    arch = args.base_architecture or checked.architecture
    return choose(source, arch, tool_calling=info.tool_calling, kwargs=info.template_kwargs)


def engine_for(args: argparse.Namespace, info: TaskInfo, checked: CheckedModel, max_tokens: int) -> EngineChoice:
    """The backend, the chat template, the engine spec and the decoding of this run."""
    from ptb_scorer import engine

    template = task_template(args, info, checked)
    if info.tool_calling and not template.tool_parser:
        why = "no tool-call parser, and the task needs native tool calls"
        raise TemplateError(f"{template.repo} {template.file}: {why}")
    backend = engine.choose_backend(args.backend)
    temperature = model_temperature(checked.path)
    spec = engine.engine_spec(
        backend,
        checked,
        template,
        template_path=engine.template_file(template),
        max_tokens=max_tokens,
        tool_calling=info.tool_calling,
        prompt_log=args.prompt_log,
        greedy=is_greedy(temperature),
    )
    decoding = {"temperature": temperature, "greedy": is_greedy(temperature)}
    # chosen before the model loads; the flags are process-wide, so every seed's generation has them
    attention = engine.use_sdpa_kernels(engine.sdpa_kernels_from_env(os.environ)) if backend == "hf" else None
    return EngineChoice(backend, template, spec, decoding, attention)
