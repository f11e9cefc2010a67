"""Every bad campaign config stops Snakemake before planning, with one line naming the key."""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO, campaign_config, snakemake, write_config

pytestmark = pytest.mark.slow

M1 = [{"name": "m1", "path": "models/m1"}]

CASES = [
    # (id, config overrides, text the error line must contain)
    ("empty-agents", {"agents": []}, "agents:"),
    ("empty-tasks", {"tasks": []}, "tasks:"),
    ("unknown-agent-dir", {"agents": ["exit0", "nobody"]}, "agents[1]: agent directory"),
    ("unknown-task-dir", {"tasks": ["nothing"]}, "tasks[0]: task directory"),
    ("duplicate-agent", {"agents": ["exit0", "exit0"]}, "agents[1]: duplicate entry"),
    ("duplicate-model", {"models": M1 + M1}, "models[].name[1]: duplicate entry"),
    ("duplicate-hours-spelled-twice", {"hours": [0.5, 0.50]}, "hours[1]: duplicate entry"),
    ("zero-budget", {"hours": [0]}, "hours[0]:"),
    ("negative-budget", {"hours": [1, -2]}, "hours[1]:"),
    ("budget-not-a-number", {"hours": ["ten"]}, "hours[0]:"),
    ("slash-in-agent", {"agents": ["team/agent"]}, "agents[0]: 'team/agent' is not a valid name"),
    ("dotdot-in-task", {"tasks": ["a..b"]}, "tasks[0]: 'a..b' is not a valid name"),
    ("whitespace-in-model", {"models": [{"name": "my model", "path": "models/m1"}]}, "models[0].name"),
    ("model-without-source", {"models": [{"name": "m1"}]}, "models[0]: give exactly one of"),
    ("model-with-two-sources", {"models": [{"name": "m1", "path": "x", "repo_id": "a/b"}]}, "models[0]: give exactly"),
    ("negative-gpus", {"num_gpus": [-1]}, "num_gpus[0]:"),
    ("run-not-an-integer", {"runs": ["first"]}, "runs[0]:"),
    ("duplicate-runs", {"runs": [1, 2, 1]}, "runs[2]: duplicate entry"),
    ("missing-prompt-template", {"solve": {"prompt_template": "no/such/template.txt"}}, "solve.prompt_template: file"),
    ("misspelled-key", {"agnets": ["exit0"]}, "'agnets' was unexpected"),
    ("unknown-solve-knob", {"solve": {"timeout": 3}}, "solve: Additional properties"),
    ("agent-config-for-stranger", {"agent_config": {"ghost": "x"}}, "agent_config.ghost"),
]


@pytest.mark.parametrize(("overrides", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_config_fails_fast_with_one_line_naming_the_key(workdir, overrides, expected):
    write_config(workdir, campaign_config(**overrides))
    res = snakemake(workdir, "-n")
    assert res.returncode != 0
    errors = [line for line in res.stderr.splitlines() if line.startswith("config error:")]
    assert len(errors) == 1, res.stderr
    assert expected in errors[0], errors[0]
    assert "Traceback" not in res.stderr
    assert not (workdir / "results").exists()


def test_agent_without_solve_sh_and_task_without_evaluate_py(workdir):
    (workdir / "agents" / "exit0" / "solve.sh").unlink()
    res = snakemake(workdir, "-n")
    assert res.returncode != 0
    assert "config error: agents[0]:" in res.stderr and "solve.sh not found" in res.stderr

    (workdir / "agents" / "exit0" / "solve.sh").write_text("exit 0\n")
    (workdir / "tasks" / "fake" / "evaluate.py").unlink()
    res = snakemake(workdir, "-n")
    assert "config error: tasks[0]:" in res.stderr and "evaluate.py not found" in res.stderr


def test_campaign_file_may_not_set_site_knobs(workdir):
    bad = workdir / "bad-campaign.yaml"
    bad.write_text(yaml.safe_dump({"agents": ["exit0"], "site": {"tmp_root": "/nowhere"}}))
    res = snakemake(workdir, "-n", "--config", f"campaign={bad}")
    assert res.returncode != 0
    assert "config error: campaign:" in res.stderr and "site" in res.stderr


def test_campaign_file_replaces_campaign_keys(workdir):
    other = workdir / "other.yaml"
    other.write_text(yaml.safe_dump({"agents": ["exit3"], "hours": [0.001, 0.002]}))
    res = snakemake(workdir, "-n", "--config", f"campaign={other}")
    assert res.returncode == 0, res.stderr
    assert "results/cells/exit3/fake/m1/0.001h-0gpu-run1/solve.json" in res.stdout
    assert "exit0" not in res.stdout


def test_profile_with_unknown_or_bad_site_knob(workdir, tmp_path):
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text((REPO / "profiles" / "local" / "config.yaml").read_text())
    for site, expected in [
        ({"runtime": "docker"}, "site.runtime:"),
        ({"gpu_reaper": "all"}, "'gpu_reaper' was unexpected"),
    ]:
        (profile / "site.yaml").write_text(yaml.safe_dump({"site": site}))
        res = snakemake(workdir, "-n", profile_dir=profile)
        assert res.returncode != 0
        assert "config error: site" in res.stderr and expected in res.stderr, res.stderr
        assert "Traceback" not in res.stderr
