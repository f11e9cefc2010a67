"""The campaign: validated configuration, its cells, and where each cell's files live.

A campaign is the cross product agents x tasks x models x hours x num_gpus x runs.
Everything here runs before any job starts, so every problem with the configuration
surfaces as one ``ConfigError`` line that names the key, not as a failed GPU job.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cached_property
from pathlib import Path
from typing import Any

from ptb_harness.campaign.agents import AgentEntry, load_agent, parse_agent_entries
from ptb_harness.campaign.tasks import load_task
from ptb_harness.core.errors import ConfigError
from ptb_harness.core.records import read_yaml_mapping

#: Names that become path components: agents, tasks, models. No '/', no '..', no
#: whitespace, not starting with '.' or '-'.
NAME_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.+=-]*"
_NAME_RE = re.compile(rf"^{NAME_PATTERN}$")
#: Hours as they appear in a cell's directory name (canonical decimal, see format_hours).
HOURS_PATTERN = r"[0-9]+(?:\.[0-9]+)?"

# Keys of a campaign file: every top-level key of the schema except `site` (site knobs come
# from profiles) and `campaign` (the file's own name); tests/unit/test_campaign.py checks it.
CAMPAIGN_KEYS = frozenset(
    {
        "agents",
        "tasks",
        "models",
        "hours",
        "num_gpus",
        "runs",
        "agent_config",
        "solve",
        "evaluate",
        "paths",
        "name",
        "grader",
        "judge",
        "leaderboard",
    }
)


@dataclass(frozen=True, order=True)
class Cell:
    """One (agent, task, model, hours, num_gpus, run) combination of a campaign."""

    agent: str
    task: str
    model: str
    hours: str  # canonical decimal string, see format_hours
    num_gpus: int
    run: int

    @property
    def budget_seconds(self) -> float:
        return float(Decimal(self.hours) * 3600)

    @property
    def slug(self) -> str:
        """A single path component naming the cell (for scratch dirs and job names)."""
        return f"{self.agent}.{self.task}.{self.model}.{self.hours}h-{self.num_gpus}gpu-run{self.run}"

    @property
    def wildcards(self) -> dict[str, str]:
        return {
            "agent": self.agent,
            "task": self.task,
            "model": self.model,
            "hours": self.hours,
            "num_gpus": str(self.num_gpus),
            "run": str(self.run),
        }

    @classmethod
    def from_wildcards(cls, wildcards: Any) -> Cell:
        """Build a cell from Snakemake wildcards (or any mapping with the same keys)."""
        get = wildcards.get if hasattr(wildcards, "get") else lambda k: getattr(wildcards, k)
        return cls(
            agent=get("agent"),
            task=get("task"),
            model=get("model"),
            hours=get("hours"),
            num_gpus=int(get("num_gpus")),
            run=int(get("run")),
        )


#: Path of a cell's directory below the results dir; the Snakemake rules use the same
#: pattern with {wildcards}, so there is one definition of the layout.
CELL_DIR_PATTERN = "cells/{agent}/{task}/{model}/{hours}h-{num_gpus}gpu-run{run}"

#: The campaign-wide outputs of collect below the results dir, by name. The collect rule
#: names its outputs with these keys and `ptb-harness collect` writes the same paths, so
#: the rule, the CLI, the tables and the plots agree on one list.
COLLECT_OUTPUTS = {
    "cells": "tables/cells.csv",
    "leaderboard_csv": "tables/leaderboard.csv",
    "leaderboard_md": "tables/leaderboard.md",
    "leaderboard_html": "tables/leaderboard.html",
    "leaderboard_png": "plots/leaderboard.png",
    "heatmap_png": "plots/heatmap.png",
    "time_png": "plots/time_vs_budget.png",
    "gpu_usage": "tables/gpu_usage.csv",
    "gpu_usage_png": "plots/gpu_usage.png",
    "viewer": "viewer/index.html",  # the campaign viewer; its other pages are written beside it
}
#: per-cell GPU plots over time, for a small named set of cells (not a rule output: the
#: set changes as the campaign runs, and the report shows campaign-level figures instead)
CELL_GPU_PLOTS = "plots/gpu"


def collect_outputs(results_dir: Path) -> dict[str, Path]:
    """COLLECT_OUTPUTS below a results dir."""
    return {name: Path(results_dir) / rel for name, rel in COLLECT_OUTPUTS.items()}


@dataclass(frozen=True)
class Model:
    """A base model: a local directory (``path``) or a Hugging Face repo id (``repo_id``)."""

    name: str
    path: str | None = None
    repo_id: str | None = None

    @property
    def source(self) -> str:
        return self.path if self.path is not None else str(self.repo_id)


def format_hours(value: Any, key: str = "hours") -> str:
    """Canonical decimal text for a budget in hours: 10 -> '10', 0.50 -> '0.5'.

    Two spellings of one budget must map to one cell directory, and the text must not
    use exponents (1e-05) so that it matches HOURS_PATTERN.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"{key}: {value!r} is not a number of hours")
    try:
        dec = Decimal(str(value))
    except InvalidOperation:
        raise ConfigError(f"{key}: {value!r} is not a number of hours") from None
    if not dec.is_finite() or dec <= 0:
        raise ConfigError(f"{key}: budget must be a positive number of hours, got {value!r}")
    text = format(dec.normalize(), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def check_name(value: Any, key: str) -> str:
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value) or ".." in value:
        raise ConfigError(
            f"{key}: {value!r} is not a valid name (letters, digits, '_', '.', '+', '=', '-';"
            " no '/', '..' or whitespace; must not start with '.' or '-')"
        )
    return value


def _check_unique(values: list[Any], key: str) -> None:
    seen: dict[Any, int] = {}
    for i, v in enumerate(values):
        if v in seen:
            raise ConfigError(f"{key}[{i}]: duplicate entry {v!r} (also at {key}[{seen[v]}])")
        seen[v] = i


def _nonempty_list(config: dict[str, Any], key: str) -> list[Any]:
    values = config.get(key)
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{key}: must be a non-empty list")
    return values


@dataclass(frozen=True)
class Campaign:
    """A validated campaign: what to run and where its files live."""

    config: dict[str, Any]
    workdir: Path

    # -- paths -------------------------------------------------------------------------
    @property
    def results_dir(self) -> Path:
        return (self.workdir / self.config["paths"]["results_dir"]).resolve()

    @property
    def agents_dir(self) -> Path:
        return (self.workdir / self.config["paths"]["agents_dir"]).resolve()

    @property
    def tasks_dir(self) -> Path:
        return (self.workdir / self.config["paths"]["tasks_dir"]).resolve()

    def cell_dir(self, cell: Cell) -> Path:
        return self.results_dir / CELL_DIR_PATTERN.format(**cell.wildcards)

    @cached_property
    def agent_entries(self) -> dict[str, AgentEntry]:
        """The `agents:` items by name (checked by check_campaign)."""
        items = parse_agent_entries(self.config["agents"], self.config.get("agent_config") or {}, check_name)
        return {e.name: e for e in items}

    @property
    def agent_names(self) -> list[str]:
        return list(self.agent_entries)

    def agent_dir(self, agent: str) -> Path:
        """The directory of the entry named ``agent`` (a bare name is its own directory)."""
        entry = self.agent_entries.get(agent)
        return self.agents_dir / (entry.dir if entry else agent)

    def task_dir(self, task: str) -> Path:
        return self.tasks_dir / task

    # -- contents ------------------------------------------------------------------------
    @property
    def models(self) -> dict[str, Model]:
        return {m["name"]: Model(m["name"], m.get("path"), m.get("repo_id")) for m in self.config["models"]}

    def model_source(self, model: str) -> str:
        """What MODEL_TO_TRAIN is set to: an absolute local path or a repo id."""
        m = self.models[model]
        if m.path is not None:
            return str((self.workdir / m.path).resolve())
        return str(m.repo_id)

    def cells(self) -> Iterator[Cell]:
        c = self.config
        for agent, task, model, hours, gpus, run in itertools.product(
            self.agent_names,
            c["tasks"],
            [m["name"] for m in c["models"]],
            [format_hours(h) for h in c["hours"]],
            c["num_gpus"],
            c["runs"],
        ):
            yield Cell(agent, task, model, hours, int(gpus), int(run))

    def agent_config(self, agent: str) -> str:
        """The entry's model (AGENT_CONFIG / AGENT_MODEL), "" when none is given."""
        entry = self.agent_entries.get(agent)
        return entry.model if entry else ""


def check_campaign(config: dict[str, Any], workdir: Path) -> Campaign:
    """Semantic checks the JSON schema cannot express. Raises ConfigError naming the key."""
    tasks = _nonempty_list(config, "tasks")
    for i, v in enumerate(tasks):
        check_name(v, f"tasks[{i}]")
    _check_unique(tasks, "tasks")
    agents = parse_agent_entries(_nonempty_list(config, "agents"), config.get("agent_config") or {}, check_name)

    models = _nonempty_list(config, "models")
    for i, m in enumerate(models):
        if not isinstance(m, dict):
            raise ConfigError(f"models[{i}]: must be a mapping with 'name' and 'path' or 'repo_id'")
        check_name(m.get("name"), f"models[{i}].name")
        if ("path" in m) == ("repo_id" in m):
            raise ConfigError(f"models[{i}]: give exactly one of 'path' (local directory) or 'repo_id'")
    _check_unique([m["name"] for m in models], "models[].name")

    hours = _nonempty_list(config, "hours")
    canonical = [format_hours(h, f"hours[{i}]") for i, h in enumerate(hours)]
    _check_unique(canonical, "hours")

    for key in ("num_gpus", "runs"):
        values = _nonempty_list(config, key)
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"{key}[{i}]: {v!r} is not a non-negative integer")
        _check_unique(values, key)

    campaign = Campaign(config=config, workdir=Path(workdir))
    for i, entry in enumerate(agents):
        try:
            spec = load_agent(campaign.agents_dir / entry.dir)
        except ConfigError as e:
            raise ConfigError(f"agents[{i}]: {e}") from None
        if entry.reprompt and not spec.resume:
            raise ConfigError(
                f"agents[{i}].reprompt: agent directory {entry.dir} cannot resume its CLI's session"
                ' (its agent.json does not say "resume": true)'
            )
    for i, task in enumerate(config["tasks"]):
        try:
            load_task(campaign.task_dir(task))
        except ConfigError as e:
            raise ConfigError(f"tasks[{i}]: {e}") from None
    template = config.get("solve", {}).get("prompt_template")
    if template and not (campaign.workdir / template).is_file():
        raise ConfigError(f"solve.prompt_template: file {campaign.workdir / template} not found")
    for agent in config.get("agent_config", {}):
        if agent not in campaign.agent_entries:
            raise ConfigError(f"agent_config.{agent}: not an agent of this campaign")
    _check_leaderboard(config, [e.name for e in agents])
    return campaign


def _check_leaderboard(config: dict[str, Any], agent_names: list[str]) -> None:
    board = config.get("leaderboard") or {}
    tasks = config["tasks"]
    weighting = board.get("weighting", "equal")
    for key in ("weights", "instruct_scores"):
        for task in board.get(key) or {}:
            if task not in tasks:
                raise ConfigError(f"leaderboard.{key}.{task}: not a task of this campaign")
    if weighting == "explicit":
        missing = [t for t in tasks if t not in (board.get("weights") or {})]
        if missing:
            raise ConfigError(f"leaderboard.weights: no weight for task(s) {', '.join(missing)} (weighting explicit)")
        if not sum(board["weights"].values()) > 0:
            raise ConfigError("leaderboard.weights: the weights sum to 0")
    if weighting == "inverse_gap":
        models = [m["name"] for m in config["models"]]
        scores = board.get("instruct_scores") or {}
        for task in tasks:
            missing = [m for m in models if m not in (scores.get(task) or {})]
            if missing:
                raise ConfigError(
                    f"leaderboard.instruct_scores.{task}: no score for model(s) {', '.join(missing)} "
                    "(weighting inverse_gap needs every task and model)"
                )
        if board.get("base_agent", "noop") not in agent_names:
            raise ConfigError(
                f"leaderboard.base_agent: {board.get('base_agent', 'noop')!r} is not an agent of this campaign "
                "(weighting inverse_gap needs the base models' scores)"
            )


def load_campaign_file(path: str | Path) -> dict[str, Any]:
    """Read a campaign file given with ``--config campaign=FILE``.

    A campaign file holds only campaign keys: site knobs belong to profiles, and a
    campaign file that set them would silently override the site.
    """
    p = Path(path)
    data = read_yaml_mapping(p, "campaign")
    unknown = sorted(set(data) - CAMPAIGN_KEYS)
    if unknown:
        raise ConfigError(
            f"campaign: {p} sets {', '.join(unknown)}, which are not campaign keys"
            f" (allowed: {', '.join(sorted(CAMPAIGN_KEYS))}; site knobs belong in the profile)"
        )
    return data
