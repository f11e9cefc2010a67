from pathlib import Path

import pytest

from ptb_harness.campaign.cells import Cell, check_name, format_hours
from ptb_harness.campaign.config import campaign_with_defaults, load_config
from ptb_harness.core.errors import ConfigError


@pytest.mark.parametrize(
    ("value", "text"),
    [(10, "10"), (0.5, "0.5"), (0.50, "0.5"), ("0.250", "0.25"), (1e-05, "0.00001"), (2.0, "2"), (100, "100")],
)
def test_format_hours_is_canonical_and_never_uses_exponents(value, text):
    assert format_hours(value) == text


@pytest.mark.parametrize("value", [0, -1, "ten", True, None, float("nan"), float("inf")])
def test_format_hours_rejects_non_budgets(value):
    with pytest.raises(ConfigError, match="hours"):
        format_hours(value)


@pytest.mark.parametrize("name", ["a/b", "..", "a..b", ".hidden", "-x", "with space", "tab\t", "", "é", "m1\n"])
def test_bad_names(name):
    with pytest.raises(ConfigError, match="key"):
        check_name(name, "key")


@pytest.mark.parametrize("name", ["noop", "claude_code-1.2", "Qwen3-1.7B", "gpt+x=y"])
def test_good_names(name):
    assert check_name(name, "key") == name


def test_every_combination_is_a_cell(tmp_path: Path):
    for a in ("a1", "a2"):
        (tmp_path / "agents" / a).mkdir(parents=True)
        (tmp_path / "agents" / a / "solve.sh").write_text("")
    (tmp_path / "tasks" / "t").mkdir(parents=True)
    (tmp_path / "tasks" / "t" / "evaluate.py").write_text("")
    config = {
        "agents": ["a1", "a2"],
        "tasks": ["t"],
        "models": [{"name": "m", "repo_id": "org/m"}, {"name": "n", "path": "n"}],
        "hours": [1, 0.5],
        "num_gpus": [1, 2],
        "runs": [1, 2, 3],
    }
    campaign = load_config(config, tmp_path)
    cells = list(campaign.cells())
    assert len(cells) == 2 * 1 * 2 * 2 * 2 * 3 == len(set(cells))
    assert campaign.model_source("m") == "org/m"
    assert campaign.model_source("n") == str(tmp_path / "n")
    # defaults from the schema are filled in
    assert config["solve"]["kill_grace_seconds"] == 30 and config["site"]["runtime"] == "none"
    cell = Cell("a1", "t", "m", "0.5", 2, 3)
    assert campaign.cell_dir(cell) == tmp_path / "results/cells/a1/t/m/0.5h-2gpu-run3"
    assert Cell.from_wildcards(cell.wildcards) == cell
    assert cell.budget_seconds == 1800


def test_results_dir_may_be_absolute_and_outside_the_workdir(tmp_path: Path):
    campaign = campaign_with_defaults({"paths": {"results_dir": "/data/ptb"}}, workdir=tmp_path)
    assert campaign.results_dir == Path("/data/ptb")


def test_campaign_file_keys_are_the_schema_keys_except_site_knobs():
    """Every top-level key of the schema may be set in a campaign file except `site` (the
    profile's) and `campaign` (the file's own name): derived here, so the list in cells.py
    and the schema cannot drift apart (`leaderboard` once could not be set from a file)."""
    import yaml

    from ptb_harness.campaign.reader import CAMPAIGN_KEYS
    from ptb_harness.core.schema import SCHEMA_PATH

    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    assert set(schema["properties"]) - {"site", "campaign"} == CAMPAIGN_KEYS


def test_a_campaign_file_may_set_the_leaderboard(tmp_path: Path):
    import subprocess
    import sys

    import yaml
    from conftest import campaign_config, make_workdir, write_agent

    from ptb_harness.campaign.config import load_config_files

    make_workdir(tmp_path, campaign_config())
    write_agent(tmp_path, "noop", "exit 0")
    board = {"weighting": "explicit", "weights": {"fake": 2}, "missing": "base_model"}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"agents": ["exit0", "noop"], "leaderboard": board}))
    campaign = load_config_files(tmp_path, campaign=str(tmp_path / "c.yaml"))
    assert campaign.settings.leaderboard.missing == "base_model"
    # the CLI reads the same file (before: "sets leaderboard, which are not campaign keys")
    cmd = [sys.executable, "-m", "ptb_harness", "collect", "--workdir", str(tmp_path), "--campaign", "c.yaml"]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "Task weights (explicit): fake 1.000." in (tmp_path / "results/tables/leaderboard.md").read_text()
