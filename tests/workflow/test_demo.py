"""The demo campaign exactly as README runs it: real tiny model, real fine-tuning, real scorer."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, snakemake

# alone: the demo agent trains for a fixed wall time, so beside another test's work it
# learns too little to show its margin over the baseline (0.045 once, under xdist)
pytestmark = [pytest.mark.slow, pytest.mark.alone]


def test_demo_campaign_fine_tuned_model_beats_the_baseline(tmp_path: Path):
    workdir = tmp_path / "campaign"
    (workdir / "config").mkdir(parents=True)
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    # results outside the working directory (an absolute path on another tree), agents
    # and tasks from the checkout: nothing may assume results live under the checkout
    results = tmp_path / "elsewhere" / "results"
    config["paths"] = {
        "results_dir": str(results),
        "agents_dir": str(REPO / "agents"),
        "tasks_dir": str(REPO / "tasks"),
    }
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))

    run = snakemake(workdir, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    cells = pd.read_csv(results / "tables" / "cells.csv").set_index("agent")
    assert set(cells["outcome"]) == {"scored"}
    for agent in ("noop", "demo_sft"):
        metrics = json.loads(next((results / "cells" / agent).rglob("metrics.json")).read_text())
        assert metrics["accuracy"] == cells.loc[agent, "accuracy"]
    baseline, tuned = cells.loc["noop", "accuracy"], cells.loc["demo_sft", "accuracy"]
    assert baseline <= 0.05, "the random base model should not add numbers"
    assert tuned >= baseline + 0.3, f"fine-tuned {tuned} vs baseline {baseline}"
    board = (results / "tables" / "leaderboard.md").read_text()
    assert "| demo_sft |" in board and "| base model: noop |" in board
    print(f"demo: baseline {baseline:.3f}, fine-tuned {tuned:.3f}")
