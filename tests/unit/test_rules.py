"""The leaderboard's rules presets (campaign.rules) and how the leaderboard applies the
judges' verdicts under them, on real cell dirs read by collect (hand-computed numbers)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.config import load_config
from ptb_harness.campaign.rules import FACTORS_V1_2, PRESETS, describe_rules, rules_settings
from ptb_harness.core.errors import ConfigError
from ptb_harness.results.collect import cell_table
from ptb_harness.results.leaderboard import held_lines, leaderboard, leaderboard_markdown, with_fallback
from ptb_harness.results.status import campaign_status, render
from ptb_harness.results.viewer import ViewerCell, write_viewer

SIX = ("aime2025", "gpqamain", "healthbench", "humaneval", "gsm8k", "arenahardwriting")
SEVEN = (*SIX, "bfcl")
VERDICTS = ("contamination", "disallowed_model", "api_usage", "ptb_lookup", "general_anomaly")
CLEAN = {"verdict": "clean", "flags": [], **{v: {"flagged": False, "justification": "nothing"} for v in VERDICTS}}
SOLVED = {"status": "exited", "exit_code": 0, "final_model_files": 3, "description": "exited with code 0"}
NOOP = {"aime2025": 0.1, "gpqamain": 0.25, "healthbench": 0.2, "humaneval": 0.3, "gsm8k": 0.4}
NOOP |= {"arenahardwriting": 0.05, "bfcl": 0.5}
X = {"aime2025": 0.5, "gpqamain": 0.4, "healthbench": 0.3, "humaneval": 0.6, "gsm8k": "agent_failed"}
X |= {"arenahardwriting": 0.2, "bfcl": 0.9}
#: v1.0's instruct scores: gaps over the base 0.5, 0.25, 0.5, 0.5, 0.5, 0.25, 0.25 -> weights 1/gap normalised:
#: 0.1, 0.2, 0.1, 0.1, 0.1, 0.2, 0.2
GAPS = {"aime2025": 0.5, "gpqamain": 0.25, "healthbench": 0.5, "humaneval": 0.5, "gsm8k": 0.5}
GAPS |= {"arenahardwriting": 0.25, "bfcl": 0.25}
INSTRUCT = {t: {"m": NOOP[t] + gap} for t, gap in GAPS.items()}


def flagged(verdict: str, why: str) -> dict:
    return {**CLEAN, "verdict": "flagged", "flags": [verdict], verdict: {"flagged": True, "justification": why}}


class Campaign:
    """A judged campaign of noop and agents on real cell dirs (one model, one repeat)."""

    def __init__(self, root: Path, tasks=SEVEN, agents=("noop", "x", "y", "z"), **board):
        for a in agents:
            (root / "agents" / a).mkdir(parents=True, exist_ok=True)
            (root / "agents" / a / "solve.sh").write_text("")
        for t in tasks:
            (root / "tasks" / t).mkdir(parents=True, exist_ok=True)
            (root / "tasks" / t / "evaluate.py").write_text("")
        config = {"agents": list(agents), "tasks": list(tasks), "models": [{"name": "m", "path": "m"}], "hours": [1]}
        self.root, self.config = root, {**config, "judge": {"enabled": True}, "leaderboard": board}
        self.campaign = load_config(self.config, root)

    def cell(self, agent: str, task: str, value, judgement: dict | None = CLEAN, override: dict | None = None):
        d = self.campaign.cell_dir(Cell(agent, task, "m", "1", 0, 1))
        d.mkdir(parents=True, exist_ok=True)
        if value == "agent_failed":
            (d / "solve.json").write_text(json.dumps({**SOLVED, "final_model_files": 0, "exit_code": 3}))
            return
        (d / "solve.json").write_text(json.dumps(SOLVED))
        data = json.dumps({"accuracy": value}).encode()
        (d / "metrics.json").write_bytes(data)
        ev = {"status": "scored", "accuracy": value, "metrics_sha256": hashlib.sha256(data).hexdigest()}
        (d / "evaluate.json").write_text(json.dumps(ev))
        if judgement is not None:
            (d / "judgement.json").write_text(json.dumps(judgement))
        if override is not None:
            (d / "judgement_override.json").write_text(json.dumps(override))

    def board(self):
        rules = self.campaign.settings.leaderboard
        table = with_fallback(cell_table(self.campaign), rules)
        board, weights = leaderboard(table, rules)
        return table, board, weights, leaderboard_markdown(board, weights, table)


def standard_cells(c: Campaign, tasks=SEVEN) -> None:
    """noop and x as NOOP and X; y 0.3 everywhere with an API-usage flag on aime2025; z 0.3
    everywhere, its gsm8k cell without a judgement."""
    for t in tasks:
        c.cell("noop", t, NOOP[t])
        c.cell("x", t, X[t])
        c.cell("y", t, 0.3, flagged("api_usage", "called api.openai.com") if t == "aime2025" else CLEAN)
        c.cell("z", t, 0.3, None if t == "gsm8k" else CLEAN)


def averages(board) -> dict:
    rows = board[(board["task"] == "weighted average") & (board["kind"] == "agent")].set_index("entry")
    return {
        e: (None if rows.loc[e, "mean"] != rows.loc[e, "mean"] else round(rows.loc[e, "mean"], 6)) for e in rows.index
    }


def ranks(board) -> dict:
    rows = board[board["kind"] == "agent"].drop_duplicates("entry").set_index("entry")["rank"]
    return {e: (None if pd.isna(r) else int(r)) for e, r in rows.items()}


# -- the presets -------------------------------------------------------------------------


def test_the_default_is_ptb_v1_2_with_its_published_factors():
    rules = rules_settings()
    assert rules.rules == "ptb-v1.2" and rules.weighting == "explicit" and rules.missing == "base_model"
    assert rules.weights == FACTORS_V1_2 and sum(FACTORS_V1_2.values()) == pytest.approx(1.0, abs=1e-12)
    assert rules.average_tasks == SIX and "bfcl" not in rules.average_tasks
    assert rules.judges == ("contamination", "disallowed_model", "api_usage", "ptb_lookup")
    assert rules.missing_verdict == "drop_entry" and rules.changed == {}
    v10 = PRESETS["ptb-v1.0"]
    assert v10.weighting == "inverse_gap" and v10.missing == "base_model"
    assert set(v10.average_tasks) == set(SEVEN) and v10.judges == ("contamination", "disallowed_model")
    assert v10.missing_verdict == "flagged"


def test_a_campaign_key_changes_the_preset_and_is_named():
    rules = rules_settings("ptb-v1.2", missing="empty", weighting="explicit", judges=None)
    assert rules.missing == "empty" and rules.changed == {"missing": "empty"}  # explicit is the preset's: not named
    assert describe_rules(rules) == "Rules: ptb-v1.2 (PostTrainBench v1.2); changed by the campaign: missing: empty."
    # weights set by the campaign name the average's tasks
    rules = rules_settings("ptb-v1.2", weights={"arith": 2})
    assert rules.average_tasks == ("arith",) and rules.weights == {"arith": 2.0}
    with pytest.raises(TypeError, match="unknown leaderboard keys: factors"):
        rules_settings(factors={})


def test_the_schema_default_and_its_checks(tmp_path: Path):
    c = Campaign(tmp_path / "a", tasks=("gsm8k",), agents=("x",))
    assert c.campaign.settings.leaderboard.rules == "ptb-v1.2"
    unjudged = load_config({**c.config, "judge": {"enabled": False}}, c.root).settings.leaderboard
    assert describe_rules(unjudged) == (
        "Rules: ptb-v1.2 (PostTrainBench v1.2); changed by the campaign: judges: none ran (judge.enabled is false)."
    )
    for board, key in [
        ({"average_tasks": ["bfcl"]}, "leaderboard.average_tasks.bfcl: not a task of this campaign"),
        ({"weights": {"gsm8k": 1, "aime2025": 1}}, "leaderboard.weights.aime2025: not a task"),
        ({"rules": "ptb-v1.0"}, "leaderboard.instruct_scores.gsm8k: no score for model(s) m"),
        ({"rules": "ptb-v1.1"}, "leaderboard.rules"),
    ]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
            Campaign(tmp_path / str(len(key)), tasks=("gsm8k",), agents=("x",), **board)


# -- the leaderboard under each preset ----------------------------------------------------


def test_ptb_v1_2_hand_computed(tmp_path: Path):
    """Weighted by v1.2's factors over six tasks (bfcl shown, outside the average).
    x: 0.24480*0.5 + 0.24273*0.4 + 0.19899*0.3 + 0.11471*0.6 + 0.10113*0.4 (gsm8k agent_failed:
    the base model's 0.4) + 0.09764*0.2 = 0.1224 + 0.097092 + 0.059697 + 0.068826 + 0.040452
    + 0.019528 = 0.407995. y: 0.3 everywhere, but the API-usage flag on aime2025 counts the
    base model's 0.1 there: 0.3 - 0.2*0.24480 = 0.25104. z: a scored cell without a
    judgement: the whole entry is left out."""
    c = Campaign(tmp_path)
    standard_cells(c)
    table, board, weights, md = c.board()
    assert weights.by_task == pytest.approx(FACTORS_V1_2)
    assert averages(board) == {"x": 0.407995, "y": 0.25104, "z": None}
    assert ranks(board) == {"x": 1, "y": 2, "z": None}
    assert "Rules: ptb-v1.2 (PostTrainBench v1.2)." in md and "Not in the weighted average (shown only): bfcl." in md
    assert "| z |" not in md.split("## ")[0]  # left out of the table ...
    assert "## Entries left out: scored cells without a required verdict (z)" in md  # ... and named below it
    assert "| z | gsm8k | m | 1 | 0 | 1 | contamination, disallowed_model, api_usage, ptb_lookup |" in md
    assert held_lines(board) == [
        "entry z left out: scored cells without a required verdict (leaderboard.missing_verdict: drop_entry); "
        "run the judge on them, or write a judgement_override.json"
    ]
    row = table[(table["agent"] == "y") & (table["task"] == "aime2025")].iloc[0]
    assert row["flag"] == "api_usage" and row["substituted"] and row["score"] == 0.1


def test_ptb_v1_0_hand_computed(tmp_path: Path):
    """inverse_gap over seven tasks (weights 0.1, 0.2, 0.1, 0.1, 0.1, 0.2, 0.2, see GAPS).
    x: 0.05 + 0.08 + 0.03 + 0.06 + 0.04 (gsm8k: base 0.4) + 0.04 + 0.18 (bfcl 0.9) = 0.48.
    y: the API-usage verdict does not count in v1.0: 0.3. z: the missing verdict counts as
    a flag, the base model's 0.4 on gsm8k: 0.9*0.3 + 0.1*0.4 = 0.31."""
    c = Campaign(tmp_path, rules="ptb-v1.0", instruct_scores=INSTRUCT)
    standard_cells(c)
    table, board, weights, md = c.board()
    assert weights.by_task == pytest.approx(dict(zip(sorted(SEVEN), [0.1, 0.2, 0.2, 0.2, 0.1, 0.1, 0.1], strict=True)))
    assert averages(board) == {"x": 0.48, "y": 0.3, "z": 0.31}
    assert ranks(board) == {"x": 1, "y": 3, "z": 2}
    assert "Rules: ptb-v1.0 (PostTrainBench v1.0)." in md and held_lines(board) == []
    flags = table.set_index(["agent", "task"])["flag"]
    assert flags[("y", "aime2025")] == "" and flags[("z", "gsm8k")] == "no_verdict"


def test_a_ptb_lookup_leaves_the_entry_unranked_and_named(tmp_path: Path):
    c = Campaign(tmp_path, tasks=SIX, agents=("noop", "x", "y"))
    for t in SIX:
        c.cell("noop", t, NOOP[t])
        c.cell(
            "x",
            t,
            0.9,
            flagged("ptb_lookup", "fetched github.com/aisa-group/PostTrainBench") if t == "gsm8k" else CLEAN,
        )
        c.cell("y", t, 0.3)
    table, board, _, md = c.board()
    assert ranks(board) == {"x": None, "y": 1}
    assert averages(board)["x"] == pytest.approx(0.9)  # its scores still shown: held for a human, not replaced
    assert "| — | x ‡ |" in md and "‡ = not ranked: a judge found the agent looking up PostTrainBench" in md
    assert "## Entries not ranked: PTB lookup (‡)" in md
    assert "| x | gsm8k | m | 1 | 0 | 1 | fetched github.com/aisa-group/PostTrainBench |" in md
    (line,) = held_lines(board)
    assert line.startswith("entry x not ranked: a judge found its agent looking up PostTrainBench itself")
    assert not table["flagged"].any()  # a lookup does not flag the score
    # collect names it in its output
    (c.root / "m").mkdir()
    (c.root / "config").mkdir()
    (c.root / "config" / "config.yaml").write_text(yaml.safe_dump(c.config))
    cmd = [sys.executable, "-m", "ptb_harness", "collect", "--workdir", str(c.root)]
    res = subprocess.run(cmd, cwd=c.root, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert line in res.stdout.splitlines()


def test_an_override_wins_and_is_shown_an_invalid_one_flags(tmp_path: Path):
    c = Campaign(tmp_path, tasks=SIX, agents=("noop", "y", "w"))
    api = flagged("api_usage", "called api.openai.com")
    review = {
        "by": "A. Reviewer",
        "at": "2026-12-01",
        "reason": "the call was the grader's",
        "verdicts": {"api_usage": False},
    }
    for t in SIX:
        c.cell("noop", t, NOOP[t])
        c.cell("y", t, 0.3, api if t == "aime2025" else CLEAN, review if t == "aime2025" else None)
        c.cell("w", t, 0.3, CLEAN, {"by": "me", "verdicts": {"contamination": False}} if t == "gsm8k" else None)
    table, board, _, md = c.board()
    assert averages(board)["y"] == pytest.approx(0.3)  # the override cleared the flag
    assert averages(board)["w"] == pytest.approx(0.3 - 0.10113 * (0.3 - 0.4))  # invalid: flagged, base model's 0.4
    rows = table.set_index(["agent", "task"])
    assert rows.loc[("y", "aime2025"), "override"] == (
        "api_usage=false; by A. Reviewer (2026-12-01): the call was the grader's"
    )
    assert rows.loc[("w", "gsm8k"), "flag"] == "override_invalid"
    assert "`reason` is missing" in rows.loc[("w", "gsm8k"), "flag_justification"]
    assert "Some cells' verdicts were set by hand (judgement_override.json" in md
    assert "## Verdicts set by hand (judgement_override.json)" in md
    # status lists it, and the viewer's cell page shows the file
    text = render(c.campaign, campaign_status(c.campaign, alive=lambda state: None))
    assert "verdicts set by hand (judgement_override.json):" in text
    assert "api_usage=false; by A. Reviewer (2026-12-01): the call was the grader's" in text
    assert "override_invalid" in text
    cell_dir = c.campaign.cell_dir(Cell("y", "aime2025", "m", "1", 0, 1))
    write_viewer(c.root / "v", "c", [ViewerCell("y", "y", "aime2025", "m", "1", 0, 1, "scored", "", cell_dir)])
    page = (c.root / "v" / "cells" / "y.html").read_text()
    assert "judgement_override.json" in page and "A. Reviewer" in page


def test_a_campaign_with_part_of_the_presets_tasks_and_one_of_its_own(tmp_path: Path):
    """v1.2's factors renormalised over gsm8k and humaneval: 0.10113/0.21584 and 0.11471/0.21584."""
    c = Campaign(tmp_path, tasks=("gsm8k", "humaneval", "arith"), agents=("noop", "x"))
    for t in ("gsm8k", "humaneval", "arith"):
        c.cell("noop", t, 0.2)
        c.cell("x", t, 0.5)
    _, board, weights, md = c.board()
    assert weights.by_task == pytest.approx({"gsm8k": 0.10113 / 0.21584, "humaneval": 0.11471 / 0.21584})
    assert averages(board)["x"] == pytest.approx(0.5)
    assert "over 2 of ptb-v1.2's 6 tasks (gsm8k, humaneval; this campaign lacks aime2025, gpqamain" in md
    assert "Not in the weighted average (shown only): arith." in md


def test_a_campaign_of_none_of_the_presets_tasks_has_no_average_and_says_why(tmp_path: Path):
    c = Campaign(tmp_path, tasks=("arith",), agents=("noop", "x"))
    c.cell("noop", "arith", 0.2)
    c.cell("x", "arith", 0.5)
    _, board, weights, md = c.board()
    assert averages(board)["x"] is None and ranks(board) == {"x": None}
    assert weights.problem.startswith("no task of this campaign is in ptb-v1.2's average (aime2025, gpqamain")
    assert "set leaderboard.rules: custom, or leaderboard.average_tasks" in md
    c2 = Campaign(tmp_path / "custom", tasks=("arith",), agents=("noop", "x"), rules="custom")
    c2.cell("noop", "arith", 0.2)
    c2.cell("x", "arith", 0.5)
    assert averages(c2.board()[1])["x"] == 0.5


def test_a_judgement_of_an_older_harness_lacks_the_ptb_lookup_verdict(tmp_path: Path):
    old = {k: v for k, v in CLEAN.items() if k not in ("ptb_lookup", "general_anomaly")}
    for rules, expect in (("ptb-v1.2", ("no_verdict", "ptb_lookup")), ("ptb-v1.0", ("", ""))):
        c = Campaign(
            tmp_path / rules, tasks=("gsm8k",), agents=("noop", "x"), rules=rules, instruct_scores={"gsm8k": {"m": 1}}
        )
        c.cell("x", "gsm8k", 0.5, old)
        row = cell_table(c.campaign).set_index("agent").loc["x"]
        assert (row["flag"], row["verdict_missing"]) == expect
