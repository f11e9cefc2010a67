from pathlib import Path

from ptb_harness.campaign.agents import load_agent
from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.config import load_config
from ptb_harness.campaign.tasks import load_task
from ptb_harness.runtime.sandbox import Sandbox
from ptb_harness.stages.agent_launch import agent_request, agent_variables
from ptb_harness.stages.job_dir import JobDir


def test_agent_env_holds_only_what_the_harness_passes(tmp_path: Path):
    (tmp_path / "agents" / "a").mkdir(parents=True)
    (tmp_path / "agents" / "a" / "solve.sh").write_text("")
    (tmp_path / "agents" / "a" / "api_keys.json").write_text('["ANTHROPIC_API_KEY"]')
    (tmp_path / "agents" / "a" / "env_passthrough.txt").write_text("AWS_PROFILE\nUNSET_ONE\n")
    (tmp_path / "tasks" / "t").mkdir(parents=True)
    (tmp_path / "tasks" / "t" / "evaluate.py").write_text("")
    (tmp_path / "tasks" / "t" / "info.json").write_text('{"required_api_keys": ["OPENAI_API_KEY"]}')
    config = {
        "agents": ["a"],
        "tasks": ["t"],
        "models": [{"name": "m", "repo_id": "org/m"}],
        "hours": [2],
        "agent_config": {"a": "opus"},
    }
    campaign = load_config(config, tmp_path)
    host = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "ANTHROPIC_API_KEY": "sk-ant-1",
        "OPENAI_API_KEY": "sk-2",
        "AWS_PROFILE": "research",
        "GITHUB_TOKEN": "ghp_not_allowlisted",
        "HF_TOKEN": "hf_not_allowlisted",
        "HUGGINGFACE_HUB_CACHE": "/shared/elsewhere",
        "CUDA_VISIBLE_DEVICES": "3",
    }
    agent = load_agent(tmp_path / "agents" / "a")
    task = load_task(tmp_path / "tasks" / "t")
    cell = Cell("a", "t", "m", "2", 1, 1)
    variables = agent_variables(campaign, cell, agent, task, "do it")
    _, names = variables
    assert names == ["AWS_PROFILE", "UNSET_ONE", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"]
    job = JobDir(tmp_path / "job")
    request = agent_request(campaign, cell, job, variables, gpus=["3"])
    launch = Sandbox(campaign.settings.site.runtime, host).launch(request)
    env = launch.env
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AWS_PROFILE"):
        assert env[name] == host[name]
    for leaked in ("GITHUB_TOKEN", "HF_TOKEN", "UNSET_ONE"):
        assert leaked not in env
    # the harness's cache wins over the host's, under every name huggingface_hub reads
    hub = str(job.home / ".cache/huggingface/hub")
    assert env["HF_HUB_CACHE"] == env["HUGGINGFACE_HUB_CACHE"] == hub
    assert env["HOME"] == str(job.home) and launch.cwd == job.home / "task"
    assert env["CUDA_VISIBLE_DEVICES"] == env["NVIDIA_VISIBLE_DEVICES"] == "3"
    assert (env["NUM_GPUS"], env["NUM_HOURS"], env["BENCHMARK_ID"]) == ("1", "2", "t")
    assert (env["MODEL_TO_TRAIN"], env["AGENT_CONFIG"], env["PROMPT"]) == ("org/m", "opus", "do it")
    assert launch.argv == ["bash", "../solve.sh"]
