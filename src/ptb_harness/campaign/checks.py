"""The checks of a campaign the JSON schema cannot express, run on the typed campaign
before anything is planned (``campaign.config.load_config`` orders them): its agents and
tasks, the leaderboard's keys, the grader's and judge's keys, the results dir, the chat
templates, what the HF cache must hold and the local base models. Each problem is one
``ConfigError`` line naming the key, before any GPU hour.
"""

from __future__ import annotations

import os
from pathlib import Path

from ptb_harness.campaign.agents import allowed_env_names
from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.scoring import missing_data, task_template, template_source, templated_tasks
from ptb_harness.core.errors import ConfigError
from ptb_harness.core.layout import built_by_workflow


def check_campaign(campaign: Campaign) -> None:
    """Every agent and task loaded (once: the stages take them from the campaign), an
    entry's reprompt backed by its agent, the prompt template found, the leaderboard's
    keys the campaign's tasks."""
    for i, entry in enumerate(campaign.agent_entries.values()):
        try:
            spec = campaign.agent(entry.name)
        except ConfigError as e:
            raise ConfigError(f"agents[{i}]: {e}") from None
        if entry.reprompt and not spec.resume:
            raise ConfigError(
                f"agents[{i}].reprompt: agent directory {entry.dir} cannot resume its CLI's session"
                ' (its agent.json does not say "resume": true)'
            )
    for i, task in enumerate(campaign.tasks):
        try:
            campaign.task(task)
        except ConfigError as e:
            raise ConfigError(f"tasks[{i}]: {e}") from None
    template = campaign.settings.solve.prompt_template
    if template and not (campaign.workdir / template).is_file():
        raise ConfigError(f"solve.prompt_template: file {campaign.workdir / template} not found")
    judge = campaign.settings.judge
    if judge.contamination_quorum > judge.contamination_runs:
        raise ConfigError(
            f"judge.contamination_quorum: {judge.contamination_quorum} is more than the "
            f"{judge.contamination_runs} contamination_runs (the runs that must flag a verdict)"
        )
    _check_leaderboard(campaign)


def _check_leaderboard(campaign: Campaign) -> None:
    board, tasks = campaign.settings.leaderboard, campaign.tasks
    # a preset's factors and task set name its own tasks; the campaign's name campaign tasks
    given = {"instruct_scores": board.instruct_scores, "weights": board.weights, "average_tasks": board.average_tasks}
    for key, entries in given.items():
        if key != "instruct_scores" and key not in board.changed:
            continue
        for task in entries or ():
            if task not in tasks:
                raise ConfigError(f"leaderboard.{key}.{task}: not a task of this campaign")
    averaged = board.in_average(tasks)
    if board.weighting == "explicit":
        missing = [t for t in averaged if t not in board.weights]
        if missing:
            raise ConfigError(f"leaderboard.weights: no weight for task(s) {', '.join(missing)} (weighting explicit)")
        if averaged and not sum(board.weights[t] for t in averaged) > 0:
            raise ConfigError("leaderboard.weights: the weights sum to 0")
    if board.weighting == "inverse_gap":
        _check_inverse_gap(campaign)


def _check_inverse_gap(campaign: Campaign) -> None:
    """inverse_gap needs every task's and model's instruct score, and the base agent's cells."""
    board = campaign.settings.leaderboard
    for task in board.in_average(campaign.tasks):
        missing = [m for m in campaign.models if m not in (board.instruct_scores.get(task) or {})]
        if missing:
            raise ConfigError(
                f"leaderboard.instruct_scores.{task}: no score for model(s) {', '.join(missing)} "
                "(weighting inverse_gap needs every task and model)"
            )
    if board.base_agent not in campaign.agent_entries:
        raise ConfigError(
            f"leaderboard.base_agent: {board.base_agent!r} is not an agent of this campaign "
            "(weighting inverse_gap needs the base models' scores)"
        )


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


def check_results_dir(campaign: Campaign) -> None:
    """The results dir can be written (it exists, or can be created)."""
    problem = campaign.settings.paths.results_problem()
    if problem:
        raise ConfigError(f"paths.results_dir: {problem}")


def check_sandbox_host(campaign: Campaign) -> None:
    """Before any cell: this host can make the site's sandbox."""
    from ptb_harness.runtime.sandbox import Sandbox

    Sandbox(campaign.settings.site.runtime, os.environ).check_host()


def check_templates(campaign: Campaign) -> None:
    """Every model has a chat template for every task that renders one: else a ConfigError.
    A source not there yet is left to the data check (a repo to prefetch) or to the
    workflow (a local model a rule builds)."""
    for task in templated_tasks(campaign):
        for model in campaign.models:
            src = template_source(campaign, model)
            if src is not None and src.dir.is_dir():
                task_template(campaign, model, task)


def check_data(campaign: Campaign) -> None:
    gaps = missing_data(campaign)
    if gaps:
        hf_home = campaign.settings.site.hf_cache.home
        raise ConfigError(
            f"HF cache {hf_home} lacks {'; '.join(gaps)}: run `ptb-harness prefetch` (login node)"
            if hf_home
            else f"{gaps[0]}: set site.hf_home to a cache filled by `ptb-harness prefetch`"
        )


def check_local_models(campaign: Campaign) -> None:
    """Every local base model exists (else Snakemake would stop later with a multi-line
    MissingInputException), except those a rule of the workflow builds."""
    for i, m in enumerate(campaign.models.values()):
        if m.path is None or built_by_workflow(m.path):
            continue
        path = Path(campaign.model_source(m.name))
        if not path.is_dir():
            what = "is not a directory" if path.exists() else "not found"
            raise ConfigError(f"models[{i}].path: {path} {what}")
