"""A task directory, read and checked: evaluate.py, benchmark.txt, info.json (the retry
ladder, the grader, the judge's test set and rules, the agent-side limit, the chat
template's use). info.json is
read here once, into a typed ``TaskSpec``; the stages read the spec, never the file."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptb_harness.campaign.agents import check_env_names
from ptb_harness.core.errors import ConfigError
from ptb_harness.core.records import read_json_object
from ptb_scorer.chat_template import RESERVED_KWARGS
from ptb_scorer.seeds import SEED_POLICIES

#: Upstream's ladder: 4 attempts at the task's defaults, then 3 and 2 at reduced token
#: caps. A task without an ``evaluate.ladder`` gets the first stage only.
DEFAULT_LADDER = ({"attempts": 4, "max_tokens": None},)


@dataclass(frozen=True)
class LadderStage:
    attempts: int
    max_tokens: int | None


@dataclass(frozen=True)
class JudgeSpec:
    """info.json ``judge``: where the task's test set is and what the agent may train on
    (``test_set`` as written: the judge checks its shape, and fails closed on a bad one)."""

    test_set: Mapping[str, Any] | None = None
    allowed_data: str | None = None
    disallowed_data: str | None = None

    @classmethod
    def from_info(cls, raw: Any) -> JudgeSpec:
        if not isinstance(raw, dict):
            return cls()
        text = {k: raw[k] if isinstance(raw.get(k), str) else None for k in ("allowed_data", "disallowed_data")}
        return cls(test_set=raw.get("test_set"), **text)


@dataclass(frozen=True)
class TaskTemplate:
    """How a task renders its prompts (info.json ``chat_template``): whether it needs
    native tool calls, and template variables of its own (the campaign's model entry wins)."""

    tool_calling: bool = False
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_info(cls, raw: Any, where: str) -> TaskTemplate | None:
        if raw is None:
            return None
        if not isinstance(raw, dict) or set(raw) - {"tool_calling", "kwargs"}:
            raise ConfigError(f'{where}: {{"tool_calling": true|false, "kwargs": {{template variables}}}}')
        if not isinstance(raw.get("tool_calling", False), bool):
            raise ConfigError(f"{where}.tool_calling: must be true or false")
        kwargs = raw.get("kwargs", {})
        if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
            raise ConfigError(f"{where}.kwargs: must be an object of template variables")
        for name in kwargs:
            if name in RESERVED_KWARGS:
                raise ConfigError(f"{where}.kwargs.{name}: an argument of apply_chat_template, not a template variable")
        return cls(raw.get("tool_calling", False), kwargs)


@dataclass(frozen=True)
class TaskSpec:
    name: str
    dir: Path
    benchmark: str
    required_api_keys: tuple[str, ...]
    ladder: tuple[LadderStage, ...]
    #: The flag that caps generation length: --max-tokens or --max-new-tokens.
    token_flag: str
    #: Extra arguments for every evaluate.py call (e.g. ["--limit", "-1"]).
    extra_args: tuple[str, ...]
    #: info.json evaluate.attempt_timeout_hours: one attempt's limit per seed (None: the campaign's)
    attempt_timeout_hours: float | None
    #: The scorer is told the base model's architecture (``--base-architecture``), so a
    #: final model of another architecture is the agent's failure.
    pass_base_architecture: bool = False
    #: What the task reads from the HF cache (info.json ``datasets``; see ptb_scorer.data).
    datasets: tuple[dict[str, Any], ...] = ()
    #: info.json ``uses_grader``: the scorer needs the campaign's grader model
    uses_grader: bool = False
    #: info.json ``judge``: the test set and the rules the judge checks the agent against
    judge: JudgeSpec = field(default_factory=JudgeSpec)
    #: info.json ``agent_default_limit``: the --limit of an agent's own evaluate.py run
    #: (ptb_scorer takes it as its default; the harness always passes --limit -1)
    agent_default_limit: int | None = None
    #: sha256 of info.json as read (None: the task has none)
    info_sha256: str | None = None
    #: info.json ``chat_template``: the task scores a chat model, with the base model's template
    chat_template: TaskTemplate | None = None
    #: info.json evaluate.seed_policy: which of the campaign's seeds the final evaluation
    #: runs (ptb_scorer.seeds.SEED_POLICIES); None: the scorer takes no seeds, one run
    seed_policy: str | None = None

    @property
    def evaluate_py(self) -> Path:
        return self.dir / "evaluate.py"

    def attempt_plan(self) -> list[int | None]:
        """The token cap of every attempt, in order (None = the task's default)."""
        return [cap for _, cap in self.ladder_steps()]

    def ladder_steps(self) -> list[tuple[int, int | None]]:
        """(stage, token cap) of every attempt, in order: stage 0 is the first."""
        return [(i, s.max_tokens) for i, s in enumerate(self.ladder) for _ in range(s.attempts)]


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _ladder(raw: Any, where: str) -> tuple[LadderStage, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: must be a non-empty list of {{attempts, max_tokens}} stages")
    stages = []
    for i, st in enumerate(raw):
        if not isinstance(st, dict) or set(st) - {"attempts", "max_tokens"}:
            raise ConfigError(f'{where}[{i}]: a stage is {{"attempts": N, "max_tokens": N or null}}')
        if not _positive_int(st.get("attempts")):
            raise ConfigError(f"{where}[{i}].attempts: must be a positive integer")
        cap = st.get("max_tokens")
        if cap is not None and not _positive_int(cap):
            raise ConfigError(f"{where}[{i}].max_tokens: must be a positive integer or null")
        stages.append(LadderStage(st["attempts"], cap))
    return tuple(stages)


def load_task(task_dir: Path) -> TaskSpec:
    """Read a task directory; raises ConfigError naming the file or key that is wrong."""
    task_dir = Path(task_dir)
    if not task_dir.is_dir():
        raise ConfigError(f"task directory {task_dir} not found")
    if not (task_dir / "evaluate.py").is_file():
        raise ConfigError(f"{task_dir / 'evaluate.py'} not found (every task needs an evaluate.py)")
    info_path = task_dir / "info.json"
    info = read_json_object(info_path)
    info_sha256 = hashlib.sha256(info_path.read_bytes()).hexdigest() if info_path.is_file() else None
    evaluate = _evaluate_section(info.get("evaluate", {}), f"{info_path}: evaluate")
    datasets = info.get("datasets", [])
    if not isinstance(datasets, list) or not all(_dataset_entry(d) for d in datasets):
        raise ConfigError(
            f"{info_path}: datasets: a list of {{kind: hf_dataset, path, ...}}, {{kind: inspect_evals_cache, files}}"
            " or {kind: file, url, path, role}"
        )
    limit = info.get("agent_default_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < -1):
        raise ConfigError(f"{info_path}: agent_default_limit: must be an integer >= -1 (-1 = all)")
    bench_file = task_dir / "benchmark.txt"
    benchmark = bench_file.read_text(encoding="utf-8").strip() if bench_file.exists() else task_dir.name
    return TaskSpec(
        name=task_dir.name,
        dir=task_dir,
        benchmark=benchmark,
        required_api_keys=tuple(check_env_names(info.get("required_api_keys", []), f"{info_path}: required_api_keys")),
        **evaluate,
        datasets=tuple(datasets),
        uses_grader=info.get("uses_grader") is True,
        judge=JudgeSpec.from_info(info.get("judge")),
        agent_default_limit=limit,
        info_sha256=info_sha256,
        chat_template=TaskTemplate.from_info(info.get("chat_template"), f"{info_path}: chat_template"),
    )


def _evaluate_section(ev: Any, where: str) -> dict[str, Any]:
    """info.json ``evaluate``, checked: the TaskSpec fields of the scorer's ladder and command line."""
    if not isinstance(ev, dict):
        raise ConfigError(f"{where}: must be an object")
    known = {"ladder", "token_flag", "extra_args", "attempt_timeout_hours", "pass_base_architecture", "seed_policy"}
    unknown = set(ev) - known
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    token_flag = ev.get("token_flag", "--max-tokens")
    if token_flag not in ("--max-tokens", "--max-new-tokens"):
        raise ConfigError(f"{where}.token_flag: must be --max-tokens or --max-new-tokens")
    extra = ev.get("extra_args", [])
    if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
        raise ConfigError(f"{where}.extra_args: must be a list of strings")
    timeout = ev.get("attempt_timeout_hours")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ConfigError(f"{where}.attempt_timeout_hours: must be a positive number")
    if not isinstance(ev.get("pass_base_architecture", False), bool):
        raise ConfigError(f"{where}.pass_base_architecture: must be true or false")
    if ev.get("seed_policy") not in (None, *SEED_POLICIES):
        raise ConfigError(f"{where}.seed_policy: one of {', '.join(SEED_POLICIES)} (or absent: no seeds)")
    return {
        "ladder": _ladder(ev.get("ladder", list(DEFAULT_LADDER)), f"{where}.ladder"),
        "token_flag": token_flag,
        "extra_args": tuple(extra),
        "attempt_timeout_hours": timeout,
        "pass_base_architecture": ev.get("pass_base_architecture", False),
        "seed_policy": ev.get("seed_policy"),
    }


def _dataset_entry(d: Any) -> bool:
    if not isinstance(d, dict):
        return False
    if d.get("kind") == "hf_dataset":
        return isinstance(d.get("path"), str) and "/" in d["path"]
    if d.get("kind") == "inspect_evals_cache":
        return isinstance(d.get("files"), list) and all(isinstance(f, str) and ".." not in f for f in d["files"])
    if d.get("kind") == "file":  # a download kept under the HF home (the graded tasks' data)
        fields = (d.get("url"), d.get("path"), d.get("role"))
        return all(isinstance(v, str) and v for v in fields) and ".." not in d["path"] and not d["path"].startswith("/")
    return False
