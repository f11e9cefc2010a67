import json
from pathlib import Path

from ptb_harness.campaign import Cell
from ptb_harness.collect import cell_table, leaderboard, leaderboard_markdown
from ptb_harness.config import load_config


def test_unscored_cells_are_named_never_zero(tmp_path: Path):
    for a in ("good", "bad"):
        (tmp_path / "agents" / a).mkdir(parents=True)
        (tmp_path / "agents" / a / "solve.sh").write_text("")
    (tmp_path / "tasks" / "t").mkdir(parents=True)
    (tmp_path / "tasks" / "t" / "evaluate.py").write_text("")
    config = {
        "agents": ["good", "bad"],
        "tasks": ["t"],
        "models": [{"name": "m", "path": "m"}],
        "hours": [1],
        "runs": [1, 2],
    }
    campaign = load_config(config, tmp_path)

    def write(cell, name, obj):
        d = campaign.cell_dir(cell)
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(json.dumps(obj))

    solved = {"status": "exited", "exit_code": 0, "final_model_files": 3, "description": "exited with code 0"}
    write(Cell("good", "t", "m", "1", 0, 1), "solve.json", solved)
    write(Cell("good", "t", "m", "1", 0, 1), "metrics.json", {"accuracy": 0.8})
    write(Cell("good", "t", "m", "1", 0, 2), "solve.json", solved)
    write(Cell("good", "t", "m", "1", 0, 2), "metrics.json", {"accuracy": 0.6})
    write(
        Cell("bad", "t", "m", "1", 0, 1),
        "solve.json",
        {**solved, "exit_code": 3, "final_model_files": 0, "description": "exited with code 3"},
    )
    # bad run 2: never ran

    table = cell_table(campaign)
    assert list(table["outcome"]) == ["scored", "scored", "agent_failed", "pending"]
    assert table["accuracy"].isna().sum() == 2
    board = leaderboard(table).set_index("agent")
    assert board.loc["good", "mean_accuracy"] == 0.7 and board.loc["good", "n_scored"] == 2
    assert board.loc["bad", "n_scored"] == 0 and board.loc["bad", "mean_accuracy"] != 0
    md = leaderboard_markdown(leaderboard(table), table)
    assert "| bad | — (0/2) |" in md and "| good | 0.700 (2/2) |" in md
    assert "agent exited with code 3; no final model" in md
