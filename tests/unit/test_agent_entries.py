"""Campaign agent entries: a name or {name, dir, model, env, reprompt}; each bad entry is
one config-error line naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptb_harness.campaign.config import load_config
from ptb_harness.campaign.tasks import load_task
from ptb_harness.core.errors import ConfigError
from ptb_harness.runtime.procs import ProcessResult
from ptb_harness.stages.agent_launch import agent_variables
from ptb_harness.stages.reprompt import resume_message, should_resume


def _workdir(tmp_path: Path) -> Path:
    for a, resume in (("claude", True), ("plain", False)):
        d = tmp_path / "agents" / a
        d.mkdir(parents=True)
        (d / "solve.sh").write_text("")
        (d / "agent.json").write_text(json.dumps({"resume": resume}))
        (d / "api_keys.json").write_text('["ANTHROPIC_API_KEY"]')
    (tmp_path / "tasks" / "t").mkdir(parents=True)
    (tmp_path / "tasks" / "t" / "evaluate.py").write_text("")
    return tmp_path


def _config(agents, **extra):
    return {"agents": agents, "tasks": ["t"], "models": [{"name": "m", "repo_id": "org/m"}], **extra}


def test_one_dir_two_models_are_two_rows_with_their_own_model_and_env(tmp_path):
    wd = _workdir(tmp_path)
    glm = {"ANTHROPIC_BASE_URL": "https://open.bigmodel.cn/api/anthropic", "API_TIMEOUT_MS": 3000000}
    campaign = load_config(
        _config(
            [
                {"name": "claude-opus-4.6", "dir": "claude", "model": "claude-opus-4-6", "reprompt": True},
                {"name": "glm-4.6", "dir": "claude", "model": "glm-4.6", "env": glm},
                "plain",
            ],
            agent_config={"plain": "some-model"},
        ),
        wd,
    )
    assert campaign.agent_names == ["claude-opus-4.6", "glm-4.6", "plain"]
    assert {c.agent for c in campaign.cells()} == set(campaign.agent_names)
    assert campaign.agent_dir("glm-4.6") == wd / "agents" / "claude" == campaign.agent_dir("claude-opus-4.6")
    assert campaign.agent_config("plain") == "some-model"  # the shorthand
    from ptb_harness.campaign.agents import load_agent
    from ptb_harness.campaign.cells import Cell

    cell = Cell("glm-4.6", "t", "m", "1", 0, 1)
    variables, names = agent_variables(
        campaign, cell, load_agent(campaign.agent_dir("glm-4.6")), load_task(wd / "tasks" / "t"), "go"
    )
    assert variables["AGENT_MODEL"] == variables["AGENT_CONFIG"] == "glm-4.6"
    assert variables["ANTHROPIC_BASE_URL"] == glm["ANTHROPIC_BASE_URL"] and variables["API_TIMEOUT_MS"] == "3000000"
    assert names == ["ANTHROPIC_API_KEY"]  # the key only by name


@pytest.mark.parametrize(
    ("agents", "extra", "message"),
    [
        (["ghost"], {}, r"agents\[0\]: agent directory .*ghost not found"),
        ([{"name": "x", "dir": "ghost"}], {}, r"agents\[0\]: agent directory .*ghost not found"),
        (["claude", {"name": "claude", "model": "m2"}], {}, r"agents\[1\]\.name: duplicate entry 'claude'"),
        ([{"name": "bad name", "dir": "claude"}], {}, r"agents\[0\]\.name: 'bad name' is not a valid name"),
        ([{"name": "x", "dir": "../claude"}], {}, r"agents\[0\]\.dir: '\.\./claude' is not a valid name"),
        (
            [{"dir": "claude", "env": {"ANTHROPIC_AUTH_TOKEN": "t"}}],
            {},
            r"agents\[0\]\.env\.ANTHROPIC_AUTH_TOKEN: names a secret",
        ),
        ([{"dir": "claude", "env": {"OPENAI_API_KEY": "k"}}], {}, r"agents\[0\]\.env\.OPENAI_API_KEY: names a secret"),
        ([{"dir": "claude", "env": {"PROMPT": "p"}}], {}, r"agents\[0\]\.env\.PROMPT: set by the harness"),
        ([{"dir": "claude", "env": {"1X": "p"}}], {}, r"agents\[0\]\.env: '1X' is not an environment variable name"),
        ([{"dir": "claude", "colour": "red"}], {}, r"agents\[0\]: Additional properties .*'colour'"),
        ([{"dir": "plain", "reprompt": True}], {}, r"agents\[0\]\.reprompt: agent directory plain cannot resume"),
        (
            [{"name": "c", "dir": "claude", "model": "a"}],
            {"agent_config": {"c": "b"}},
            r"agents\[0\]\.model: also given",
        ),
        (["claude"], {"agent_config": {"ghost": "b"}}, r"agent_config\.ghost: not an agent of this campaign"),
        ([{"model": "m"}], {}, r"agents\[0\]: give `name`"),
    ],
)
def test_bad_entries_are_one_line_naming_the_entry(tmp_path, agents, extra, message):
    with pytest.raises(ConfigError, match=message) as e:
        load_config(_config(agents, **extra), _workdir(tmp_path))
    assert "\n" not in str(e.value)


def test_resume_only_after_a_clean_early_exit_with_enough_time_left():
    ok = ProcessResult("exited", 0, None, 0.0, 1.0)
    assert should_resume(ok, left_s=1900, min_left_s=1800)
    assert not should_resume(ok, left_s=1700, min_left_s=1800)
    assert not should_resume(ProcessResult("exited", 1, None, 0.0, 1.0), 1900, 1800)
    assert not should_resume(ProcessResult("timeout", None, 15, 0.0, 1.0), 1900, 1800)
    assert resume_message(2 * 3600 + 5 * 60 + 59).startswith("You still have 2h 5m remaining")


def test_an_entrys_llm_budget_replaces_only_the_keys_it_names(tmp_path):
    """A key the entry does not name keeps the campaign's limit (the schema filled every
    key with null, which removed the campaign's USD and requests limits from an entry that
    named only tokens); a key it names as null is no limit."""
    from ptb_harness.gateway.meter import Limits
    from ptb_harness.stages.llm_gateway import cell_limits

    wd = _workdir(tmp_path)
    entries = [
        {"name": "tight", "dir": "claude", "llm_budget": {"tokens": 5000, "usd": None}},
        {"name": "loose", "dir": "claude"},
    ]
    campaign = load_config(_config(entries, solve={"llm_budget": {"usd": 2.5, "requests": 100}}), wd)
    limits = {c.agent: cell_limits(campaign, c) for c in campaign.cells()}
    assert limits == {"tight": Limits(usd=None, tokens=5000, requests=100), "loose": Limits(2.5, None, 100)}


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"dollars": 3}, "agents[0].llm_budget: Additional properties are not allowed ('dollars' was unexpected)"),
        ({"tokens": -1}, "agents[0].llm_budget.tokens: -1 is less than the minimum of 1"),
        ({"tokens": 2.5}, "agents[0].llm_budget.tokens: 2.5 is not of type 'integer', 'null'"),
        ({"usd": True}, "agents[0].llm_budget.usd: True is not of type 'number', 'null'"),
        ("10 dollars", "agents[0].llm_budget: '10 dollars' is not of type 'object'"),
    ],
)
def test_a_bad_llm_budget_is_one_line_naming_its_key(tmp_path, budget, message):
    wd = _workdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        load_config(_config([{"name": "x", "dir": "claude", "llm_budget": budget}]), wd)
    assert str(e.value) == message
