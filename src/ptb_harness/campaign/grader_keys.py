"""The rule that the grader's and the judge's keys reach only the scorer and the judge,
never an agent."""

from __future__ import annotations

from ptb_harness.campaign.agents import allowed_env_names
from ptb_harness.campaign.cells import Campaign
from ptb_harness.core.errors import ConfigError


def check_grader_keys(campaign: Campaign) -> None:
    """A key variable of the grader or judge that some agent would receive (its
    api_keys.json, env_passthrough.txt, or a task's required_api_keys) is a config error:
    upstream handed the grader key to every agent."""
    keys = campaign.settings.grader_key_names
    if not keys:
        return
    for agent_name in campaign.agent_names:
        agent = campaign.agent(agent_name)
        for task in campaign.tasks:
            leaked = sorted(set(keys) & set(allowed_env_names(agent, campaign.task(task).required_api_keys)))
            if leaked:
                raise ConfigError(
                    f"{keys[leaked[0]]}: {leaked[0]} would reach agent {agent_name} in task {task} "
                    "(its api_keys.json, env_passthrough.txt or the task's required_api_keys); "
                    "give the grader and judge a variable of their own, e.g. PTB_GRADER_API_KEY"
                )
