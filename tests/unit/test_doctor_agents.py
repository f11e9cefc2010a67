"""doctor: each campaign agent's CLI at its pinned version, in the site's runtime."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ptb_harness.campaign.config import load_config
from ptb_harness.doctor import check_agent_clis
from ptb_harness.runtime.agent_cli import pinned_versions

REPO = Path(__file__).resolve().parents[2]
CLAUDE = "@anthropic-ai/claude-code"


def _campaign(tmp_path: Path, site: dict):
    for d in ("claude", "cli"):
        shutil.copytree(REPO / "agents" / d, tmp_path / "agents" / d)
    (tmp_path / "tasks" / "t").mkdir(parents=True)
    (tmp_path / "tasks" / "t" / "evaluate.py").write_text("")
    config = {
        "agents": [{"name": "opus", "dir": "claude", "model": "a"}, {"name": "glm", "dir": "claude", "model": "b"}],
        "tasks": ["t"],
        "models": [{"name": "m", "repo_id": "org/m"}],
        "site": site,
    }
    return load_config(config, tmp_path)


def _install(prefix: Path, package: str, version: str) -> None:
    d = prefix / "node_modules" / package
    d.mkdir(parents=True, exist_ok=True)
    (d / "package.json").write_text(json.dumps({"name": package, "version": version}))


def test_runtime_none_checks_the_setup_agents_prefix_once_per_cli(tmp_path):
    campaign = _campaign(tmp_path, {"agent_cli_prefix": "clis"})
    want = pinned_versions(tmp_path / "agents" / "cli")[CLAUDE]
    (check,) = check_agent_clis(campaign)  # two entries, one CLI
    assert not check.ok and "not installed" in check.line() and "ptb-harness setup-agents" in check.line()
    _install(tmp_path / "clis", CLAUDE, "0.0.1")
    (check,) = check_agent_clis(campaign)
    assert not check.ok and f"0.0.1 in {tmp_path / 'clis'} (pinned {want})" in check.line()
    _install(tmp_path / "clis", CLAUDE, want)
    (check,) = check_agent_clis(campaign)
    assert check.ok, check.line()


def test_runtime_apptainer_asks_the_agent_image(tmp_path):
    want = pinned_versions(REPO / "agents" / "cli")[CLAUDE]
    fake = tmp_path / "apptainer"  # a stand-in for apptainer: `exec IMAGE cat FILE` prints a manifest
    fake.write_text(
        f'#!/bin/sh\n[ "$4" = /opt/agent-cli/node_modules/{CLAUDE}/package.json ] && echo \'{{"version": "{want}"}}\'\n'
    )
    fake.chmod(0o755)
    image = tmp_path / "agent.sif"
    image.write_text("")
    campaign = _campaign(tmp_path, {"runtime": "apptainer", "apptainer": str(fake), "agent_image": str(image)})
    (check,) = check_agent_clis(campaign)
    assert check.ok and f"{image}:/opt/agent-cli" in check.line()
