"""A validated campaign: what to run (the grid of cells), its typed settings, the agents
and tasks it names (each read from its directory once), and where each cell's dir is.
Built by ``campaign.reader`` (the one reader of the config mapping) and checked by
``campaign.checks``."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ptb_harness.campaign.agents import AgentEntry, AgentSpec, load_agent
from ptb_harness.campaign.cells import Cell, Model
from ptb_harness.campaign.settings import Settings
from ptb_harness.campaign.tasks import TaskSpec, load_task
from ptb_harness.core.layout import cell_dir_rel


@dataclass(frozen=True)
class Campaign:
    """A validated campaign: what to run, its settings, and where its files live.

    Built by ``ptb_harness.campaign.reader`` (the one reader of the config mapping).
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

    def cgroup_warning(self) -> str | None:
        """One line when this host cannot make the cells' cgroups (site.agent_limits.cgroup
        auto): their agents' memory and process counts would not be capped."""
        from ptb_harness.runtime.caps import no_cgroup_warning

        return no_cgroup_warning(self.settings.site.agent_limits)

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
