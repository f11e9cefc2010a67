"""One cell's solve as settled before the agent starts (``SolveRun``), and how each turn
of the agent is launched and run from it. The solve's steps (preflight, reprompt,
delivery, record) only read it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptb_harness.campaign.agents import AgentSpec
from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.tasks import TaskSpec
from ptb_harness.core.cell_files import PARTIAL_TRACE
from ptb_harness.gateway.process import GatewayProcess
from ptb_harness.gpu.cellset import GpuSet
from ptb_harness.gpu.monitor import GpuMonitor
from ptb_harness.runtime.caps import CellCaps
from ptb_harness.runtime.procs import ProcessResult
from ptb_harness.runtime.sandbox import Launch, Sandbox
from ptb_harness.stages.agent_launch import AgentVariables, agent_request
from ptb_harness.stages.attempts import update_attempt
from ptb_harness.stages.evidence import JudgedSamples
from ptb_harness.stages.job_dir import JobDir
from ptb_harness.stages.llm_gateway import agent_endpoints, agent_env

#: the agent's view of the HF cache: (host dir to bind, read-only), from runtime.hf_cache
HfView = tuple[Path | None, bool]


@dataclass(frozen=True)
class SolveRun:
    """What the solve's preparation settled for one cell; the later steps only read it."""

    campaign: Campaign
    cell: Cell
    agent: AgentSpec
    task: TaskSpec
    job: JobDir
    host_env: Mapping[str, str]
    gpu_set: GpuSet
    nvml: Any
    variables: AgentVariables
    cell_dir: Path
    #: when the agent's clock started, and its budget and hard limit from then
    started: float
    budget_s: float
    limit_s: float
    #: the how-manyth try of this cell (ptb_harness.stages.attempts)
    attempt: int
    #: sha256 of the job dir's copy of solve.sh, taken before the agent could change it
    solve_sh_sha256: str
    #: the cell's LLM gateway while the agent runs (agents whose agent.json has "llm")
    gateway: GatewayProcess | None = None
    #: the cell's caps (cgroup, rlimits) while the agent may run; every launch is confined by them
    caps: CellCaps | None = None
    #: with the judge: the task's test samples for the evidence recorder (stages.evidence)
    test_set: JudgedSamples | None = None
    #: the evidence recorder's pid while the agent runs (a child of ours, not the agent's leftover)
    recorder_pid: int | None = None

    def confined(self, caps: CellCaps) -> SolveRun:
        return dataclasses.replace(self, caps=caps)

    @property
    def gpus(self) -> list[str]:
        return self.gpu_set.sandbox_ids()

    @property
    def trace(self) -> Path:
        """Written beside the results, outside anything the agent can write: an agent that
        fills its scratch cannot cut it short (or replace it by a link)."""
        return self.cell_dir / PARTIAL_TRACE

    def launch(
        self,
        hf_view: HfView,
        command: list[str] | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> Launch:
        env = {**agent_env(self.gateway), **(extra_env or {})}
        request = agent_request(self.campaign, self.cell, self.job, self.variables, self.gpus, hf_view, command, env)
        request = dataclasses.replace(request, endpoints=agent_endpoints(self.gateway))
        launch = Sandbox(self.campaign.settings.site.runtime, self.host_env).launch(request)
        return self.caps.wrap(launch) if self.caps is not None else launch

    def run_agent(self, launch: Launch, budget_s: float, *, append: bool = False) -> ProcessResult:
        """One turn of the agent, to its trace, while the GPU monitor samples its cards."""
        site, solve = self.campaign.settings.site, self.campaign.settings.solve
        monitor = GpuMonitor.for_cell(
            self.nvml, self.gpu_set.gpus, self.cell_dir, "solve", site.gpu.monitor_interval_seconds
        )
        with monitor:
            return launch.run(
                self.trace,
                budget_s=budget_s,
                kill_grace_s=float(solve.kill_grace_seconds),
                append=append,
                on_start=lambda pid: update_attempt(self.cell_dir, self.attempt, agent_pid=pid),
                max_output_bytes=site.trace_max_bytes,
                # stopped when its LLM budget is spent or its gateway died; the gateway
                # and the evidence recorder (our children) are no leftovers of the agent's
                stop=self.gateway.stop_agent if self.gateway else None,
                spare=tuple(p for p in (self.gateway.pid if self.gateway else None, self.recorder_pid) if p),
            )
