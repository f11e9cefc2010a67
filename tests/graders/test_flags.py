"""The judge's flags in the results: status marks them F, the leaderboard leaves flagged
scores out (`missing: empty`) or counts the base model's score (`missing: base_model`),
and the report lists every flag with its justification. A scored cell of a judged
campaign without a verdict is flagged too (fail closed)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.config import load_config
from ptb_harness.results.collect import cell_table
from ptb_harness.results.leaderboard import leaderboard, leaderboard_html, leaderboard_markdown, with_fallback
from ptb_harness.results.status import campaign_status, grid, render

SOLVED = {"status": "exited", "exit_code": 0, "final_model_files": 3, "description": "exited with code 0"}
CONTAMINATED = {
    "verdict": "flagged",
    "flags": ["contamination"],
    "contamination": {"flagged": True, "flagged_by": ["ngram"], "justification": "[ngram] 40 of 50 test samples found"},
    "disallowed_model": {"flagged": False, "justification": "ok"},
    "api_usage": {"flagged": False, "justification": "ok"},
    "ptb_lookup": {"flagged": False, "justification": "ok"},
}
VERDICTS = ("contamination", "disallowed_model", "api_usage", "ptb_lookup", "general_anomaly")
CLEAN = {"verdict": "clean", "flags": [], **{v: {"flagged": False, "justification": "ok"} for v in VERDICTS}}


def judged_campaign(tmp_path: Path, missing: str):
    for a in ("noop", "a"):
        (tmp_path / "agents" / a).mkdir(parents=True, exist_ok=True)
        (tmp_path / "agents" / a / "solve.sh").write_text("")
    (tmp_path / "tasks" / "t").mkdir(parents=True, exist_ok=True)
    (tmp_path / "tasks" / "t" / "evaluate.py").write_text("")
    config = {
        "agents": ["noop", "a"],
        "tasks": ["t"],
        "models": [{"name": "m", "path": "m"}],
        "hours": [1],
        "runs": [1, 2, 3],
        "judge": {"enabled": True},
        "leaderboard": {"rules": "custom", "missing": missing},
    }
    campaign = load_config(config, tmp_path)

    def scored(agent, run, acc, judgement):
        d = campaign.cell_dir(Cell(agent, "t", "m", "1", 0, run))
        d.mkdir(parents=True, exist_ok=True)
        (d / "solve.json").write_text(json.dumps(SOLVED))
        data = json.dumps({"accuracy": acc}).encode()
        (d / "metrics.json").write_bytes(data)
        ev = {"status": "scored", "accuracy": acc, "metrics_sha256": hashlib.sha256(data).hexdigest(), "attempts": []}
        (d / "evaluate.json").write_text(json.dumps(ev))
        if judgement is not None:
            (d / "judgement.json").write_text(json.dumps(judgement))

    for run in (1, 2, 3):
        scored("noop", run, 0.3, CLEAN)
    scored("a", 1, 0.9, CONTAMINATED)
    scored("a", 2, 0.8, None)  # the judge has not given a verdict
    scored("a", 3, 0.7, CLEAN)
    return campaign


def test_status_marks_flagged_cells(tmp_path: Path):
    campaign = judged_campaign(tmp_path, "empty")
    statuses = campaign_status(campaign, alive=lambda state: None)
    rows = {line.split()[0]: line.split()[-1] for line in grid(statuses)[1:]}
    assert rows == {"noop": "SSS", "a": "FFS"}
    text = render(campaign, statuses)
    assert "F scored but flagged by the judge" in text
    assert "contamination" in text and "40 of 50 test samples found" in text
    assert "no_verdict" in text


@pytest.mark.parametrize(("missing", "mean"), [("empty", 0.7), ("base_model", (0.3 + 0.3 + 0.7) / 3)])
def test_the_leaderboard_never_counts_a_flagged_score(tmp_path: Path, missing: str, mean: float):
    campaign = judged_campaign(tmp_path, missing)
    table = with_fallback(cell_table(campaign), campaign.settings.leaderboard)
    assert list(table[table["agent"] == "a"]["flag"]) == ["contamination", "no_verdict", ""]
    board, weights = leaderboard(table, campaign.settings.leaderboard)
    row = board[(board["entry"] == "a") & (board["task"] == "t")].iloc[0]
    assert row["mean"] == pytest.approx(mean)
    md = leaderboard_markdown(board, weights, table)
    assert "## Flagged cells (judge)" in md
    counted = "base model's score" if missing == "base_model" else "left out"
    assert f"| a | t | m | 1 | 0 | 1 | contamination | {counted} | contamination: [ngram] 40 of 50" in md
    assert "no judgement.json: the judge has not run on this cell" in md
    html = leaderboard_html(board, weights, table, [])
    assert "<h2>Flagged cells (2)</h2>" in html


def test_without_the_judge_nothing_is_flagged(tmp_path: Path):
    campaign = judged_campaign(tmp_path, "empty")
    settings = campaign.settings
    campaign = replace(campaign, settings=replace(settings, judge=replace(settings.judge, enabled=False)))
    table = cell_table(campaign)
    # a verdict on disk still flags; a missing one does not, with the judge off
    assert list(table[table["agent"] == "a"]["flag"]) == ["contamination", "", ""]
