"""What the scorer reads of its task's info.json, once, and what an attempt runs with (the
PTB_SCORER_INFO record that heads metrics.json)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptb_scorer import data
from ptb_scorer.model import CheckedModel


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
        )

    @property
    def cap_name(self) -> str:
        """The token cap's name in the parsed arguments and the records (max_tokens, max_new_tokens)."""
        return self.cap_flag.lstrip("-").replace("-", "_")


def attempt_record(
    name: str, info: TaskInfo, args: argparse.Namespace, checked: CheckedModel, backend: str
) -> dict[str, Any]:
    """What an attempt runs with (PTB_SCORER_INFO, and the head of metrics.json)."""
    from ptb_scorer import engine

    versions = engine.versions()
    return {
        "task": name,
        info.cap_name: getattr(args, info.cap_name),
        "limit": args.limit,
        "engine": backend,
        "engine_version": versions.get("vllm" if backend == "vllm" else "transformers"),
        "versions": versions,
        "architecture": checked.architecture,
        "template": {"name": checked.template.name, "sha256": checked.template.sha256},
        "datasets": [data.revision(d) for d in info.datasets],
    }
