"""The campaign's grader and judge endpoints, and the rule that their keys reach only
the scorer and the judge, never an agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from ptb_harness.campaign.agents import allowed_env_names, load_agent
from ptb_harness.core.errors import ConfigError
from ptb_harness.core.records import read_json_object
from ptb_harness.graders.client import Endpoint, GraderConfigError

Role = Literal["grader", "judge"]
#: site.grader_endpoint keys that override the campaign's (where the endpoint is, not what it is)
SITE_OVERRIDES = ("base_url", "api_key_env", "concurrency", "timeout_seconds")


def endpoint_for(config: dict[str, Any], role: Role) -> Endpoint:
    """The grader's (role grader) or the judge's endpoint: the campaign's keys, then the
    site's overrides. The config is schema-validated, so defaults are filled in."""
    data = dict(config["grader"] if role == "grader" else config["judge"]["endpoint"])
    site = (config.get("site") or {}).get("grader_endpoint") or {}
    data.update({k: site[k] for k in SITE_OVERRIDES if site.get(k) is not None})
    where = "grader" if role == "grader" else "judge.endpoint"
    try:
        return Endpoint.from_dict(data, where)
    except GraderConfigError as e:
        raise ConfigError(str(e)) from None


def grader_key_names(config: dict[str, Any]) -> dict[str, str]:
    """Variable name -> the config key that names it, for the variables that hold grader
    and judge keys: never an agent's."""
    names = {}
    if config["judge"]["enabled"]:
        names[endpoint_for(config, "judge").api_key_env] = "judge.endpoint.api_key_env"
    names[endpoint_for(config, "grader").api_key_env] = "grader.api_key_env"
    return {n: key for n, key in names.items() if n}


def task_uses_grader(task_dir: Path) -> bool:
    """info.json `"uses_grader": true`: the scorer needs the campaign's grader."""
    return read_json_object(Path(task_dir) / "info.json").get("uses_grader") is True


def check_grader_keys(config: dict[str, Any], agents_dir: Path, tasks_dir: Path) -> None:
    """A key variable of the grader or judge that some agent would receive (its
    api_keys.json, env_passthrough.txt, or a task's required_api_keys) is a config error:
    upstream handed the grader key to every agent."""
    keys = grader_key_names(config)
    if not keys:
        return
    task_keys = {
        t: tuple(read_json_object(Path(tasks_dir) / t / "info.json").get("required_api_keys") or ())
        for t in config["tasks"]
    }
    for entry in config["agents"]:
        # an item is an agent name or a mapping {name, dir, ...} (campaign.agents)
        agent_name = entry if isinstance(entry, str) else entry.get("name", entry.get("dir"))
        agent = load_agent(Path(agents_dir) / (entry if isinstance(entry, str) else entry.get("dir", agent_name)))
        for task, required in task_keys.items():
            leaked = sorted(set(keys) & set(allowed_env_names(agent, required)))
            if leaked:
                raise ConfigError(
                    f"{keys[leaked[0]]}: {leaked[0]} would reach agent {agent_name} in task {task} "
                    "(its api_keys.json, env_passthrough.txt or the task's required_api_keys); "
                    "give the grader and judge a variable of their own, e.g. PTB_GRADER_API_KEY"
                )
