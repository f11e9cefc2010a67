"""What the agent is launched with: the harness's variables, the names it may copy from
the host, and the sandbox launch request (solve.sh, or the preflight, in HOME/task)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from ptb_harness.campaign.agents import AgentSpec, allowed_env_names
from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.tasks import TaskSpec
from ptb_harness.runtime.sandbox import Bind, LaunchRequest
from ptb_harness.stages.job_dir import JobDir


class AgentVariables(NamedTuple):
    """The harness's variables for the agent, and the names it may copy from the host.

    Nothing else of the launching environment reaches the agent: the sandbox adds only
    HOME, TMPDIR, LANG, the cache variables and the cell's GPUs. Copied by name: the
    agent's env_passthrough.txt names and the allowlisted API keys (agent's + task's).
    """

    values: dict[str, str]
    pass_names: list[str]

    def passed(self, host_env: Mapping[str, str]) -> list[str]:
        return [n for n in self.pass_names if n in host_env]

    def missing(self, host_env: Mapping[str, str]) -> list[str]:
        return [n for n in self.pass_names if n not in host_env]


def agent_variables(campaign: Campaign, cell: Cell, agent: AgentSpec, task: TaskSpec, prompt: str) -> AgentVariables:
    """With an LLM gateway (agent.json "llm"), the agent's API keys are not passed (the
    gateway holds the key) and the entry's base URL is the gateway's upstream, not the
    agent's: it gets PTB_LLM_BASE_URL and PTB_LLM_TOKEN at launch instead."""
    entry = campaign.agent_entries.get(cell.agent)
    entry_env = dict(entry.env if entry else ())
    hidden: set[str] = set()
    if agent.llm is not None:
        entry_env.pop(agent.llm.base_url_env, None)
        hidden = set(agent.api_keys)
    values = {
        # the entry's non-secret settings (checked: they cannot replace the harness's)
        **entry_env,
        "PROMPT": prompt,
        "NUM_GPUS": str(cell.num_gpus),
        "NUM_HOURS": cell.hours,
        "BENCHMARK_ID": task.name,
        "MODEL_TO_TRAIN": campaign.model_source(cell.model),
        "AGENT_CONFIG": campaign.agent_config(cell.agent),
        "AGENT_MODEL": campaign.agent_config(cell.agent),
    }
    # grader and judge keys never reach an agent (the config check refuses such a
    # campaign; this keeps it so for any caller)
    grader_keys = campaign.settings.grader_key_names
    names = [n for n in allowed_env_names(agent, task.required_api_keys) if n not in grader_keys and n not in hidden]
    return AgentVariables(values, names)


def agent_request(
    campaign: Campaign,
    cell: Cell,
    job: JobDir,
    variables: AgentVariables,
    gpus: list[str],
    hf_view: tuple[Path | None, bool] = (None, False),
    command: list[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> LaunchRequest:
    """The agent's launch request: solve.sh (or ``command``, e.g. the preflight) in
    HOME/task, with the cell's variables (and ``extra_env``, e.g. a resume's), GPUs and model."""
    model = campaign.models[cell.model]
    source = variables.values["MODEL_TO_TRAIN"]
    return LaunchRequest(
        role="agent",
        command=command or ["bash", "../solve.sh"],  # relative to HOME/task in every runtime
        job_home=job.home,
        job_tmp=job.tmp,
        workdir="task",
        env={**variables.values, **(extra_env or {})},
        pass_names=variables.pass_names,
        gpus=gpus,
        binds=[Bind(Path(source), source, True)] if model.path else [],
        hf_home_host=hf_view[0],
        hf_read_only=hf_view[1],
    )
