"""The campaign: validated configuration, its cells, and where each cell's files live.

A campaign is the cross product agents x tasks x models x hours x num_gpus x runs.
Everything here runs before any job starts, so every problem with the configuration
surfaces as one ``ConfigError`` line that names the key, not as a failed GPU job.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptb_harness.campaign.agents import AgentEntry, AgentSpec, load_agent
from ptb_harness.campaign.tasks import TaskSpec, load_task
from ptb_harness.core.errors import ConfigError
from ptb_harness.core.layout import NAME_PATTERN, cell_dir_rel
from ptb_harness.core.records import read_yaml_mapping

if TYPE_CHECKING:  # settings imports this module to build a Campaign
    from ptb_harness.campaign.settings import Settings

_NAME_RE = re.compile(rf"^{NAME_PATTERN}$")

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


@dataclass(frozen=True)
class Campaign:
    """A validated campaign: what to run, its settings, and where its files live.

    Built by ``ptb_harness.campaign.settings`` (the one reader of the config mapping).
    Agents and tasks are read from their directories once and kept here, so the plan's
    checks and a stage's run use the same specs."""

    workdir: Path
    settings: Settings
    #: the `agents:` items by name (a leaderboard row each; see AgentEntry)
    agent_entries: Mapping[str, AgentEntry]
    tasks: tuple[str, ...]
    models: Mapping[str, Model]
    #: canonical decimal text of each budget (see format_hours)
    hours: tuple[str, ...]
    num_gpus: tuple[int, ...]
    runs: tuple[int, ...]
    _agent_specs: dict[str, AgentSpec] = field(default_factory=dict, compare=False, repr=False)
    _task_specs: dict[str, TaskSpec] = field(default_factory=dict, compare=False, repr=False)

    # -- paths -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def results_dir(self) -> Path:
        return self.settings.paths.results_dir

    @property
    def agents_dir(self) -> Path:
        return self.settings.paths.agents_dir

    @property
    def tasks_dir(self) -> Path:
        return self.settings.paths.tasks_dir

    def cell_dir(self, cell: Cell) -> Path:
        return self.results_dir / cell_dir_rel(cell.wildcards)

    @property
    def agent_names(self) -> list[str]:
        return list(self.agent_entries)

    def agent_dir(self, agent: str) -> Path:
        """The directory of the entry named ``agent`` (a bare name is its own directory)."""
        entry = self.agent_entries.get(agent)
        return self.agents_dir / (entry.dir if entry else agent)

    def task_dir(self, task: str) -> Path:
        return self.tasks_dir / task

    def untrusted_warning(self) -> str | None:
        """One line when runtime `none` would run agents not marked trusted in agent.json."""
        if self.settings.site.runtime.runtime != "none":
            return None
        untrusted = [a for a in self.agent_names if not self.agent(a).trusted]
        if not untrusted:
            return None
        return (
            f"WARNING: site.runtime none runs {', '.join(untrusted)} unconfined (not marked trusted in "
            "agent.json): they can read and write everything you can; use runtime bwrap or apptainer"
        )

    # -- contents ------------------------------------------------------------------------
    def agent(self, name: str) -> AgentSpec:
        """The agent's spec, read from its directory the first time it is asked for."""
        if name not in self._agent_specs:
            self._agent_specs[name] = load_agent(self.agent_dir(name))
        return self._agent_specs[name]

    def task(self, name: str) -> TaskSpec:
        """The task's spec, read from its directory the first time it is asked for."""
        if name not in self._task_specs:
            self._task_specs[name] = load_task(self.task_dir(name))
        return self._task_specs[name]

    def model_source(self, model: str) -> str:
        """What MODEL_TO_TRAIN is set to: an absolute local path or a repo id."""
        m = self.models[model]
        if m.path is not None:
            return str((self.workdir / m.path).resolve())
        return str(m.repo_id)

    def cells(self) -> Iterator[Cell]:
        for agent, task, model, hours, gpus, run in itertools.product(
            self.agent_entries, self.tasks, self.models, self.hours, self.num_gpus, self.runs
        ):
            yield Cell(agent, task, model, hours, gpus, run)

    def agent_config(self, agent: str) -> str:
        """The entry's model (AGENT_CONFIG / AGENT_MODEL), "" when none is given."""
        entry = self.agent_entries.get(agent)
        return entry.model if entry else ""


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
