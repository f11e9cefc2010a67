import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.config import load_config
from ptb_harness.campaign.reader import leaderboard_settings
from ptb_harness.core.schema import validate_schema
from ptb_harness.results.collect import cell_table
from ptb_harness.results.leaderboard import leaderboard, leaderboard_markdown, task_weights


def board_settings(**keys):
    """The leaderboard settings of a campaign that sets these keys (the schema's defaults for
    the rest, under the `custom` rules: these tables' tasks are no PostTrainBench tasks)."""
    config = {"leaderboard": {"rules": "custom", **keys}}
    validate_schema(config)
    return leaderboard_settings(config["leaderboard"])


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
        if name == "metrics.json":  # as the evaluate stage writes it: evaluate.json vouches for it
            digest = hashlib.sha256(json.dumps(obj).encode()).hexdigest()
            ev = {"status": "scored", "accuracy": obj["accuracy"], "metrics_sha256": digest}
            (d / "evaluate.json").write_text(json.dumps(ev))

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
    board, _ = leaderboard(table, board_settings())
    board = board[board["task"] == "t"].set_index("entry")
    assert board.loc["good", "mean"] == 0.7 and board.loc["good", "n_scored"] == 2
    assert round(board.loc["good", "std"], 6) == round(0.1414213562, 6)  # sample std of 0.8, 0.6
    assert board.loc["bad", "n_scored"] == 0 and board.loc["bad", "mean"] != 0
    board, weights = leaderboard(table, board_settings())
    md = leaderboard_markdown(board, weights, table)
    assert "| bad | — (0/2) | — (0/2) |" in md and "| good | 0.700 ± 0.141 (2/2) | 0.700 ± 0.141 (2/2) |" in md
    assert "agent exited with code 3; no final model" in md


def _table(rows):
    cols = ["agent", "task", "model", "hours", "num_gpus", "run", "accuracy", "outcome"]
    return pd.DataFrame([dict(zip(cols, r, strict=True)) for r in rows])


def test_inverse_gap_weights_against_a_hand_computed_example():
    """Two tasks, two models, two repeats. Base (noop) means: t1 0.1, t2 0.4; instruct
    means: t1 0.6 (0.5, 0.7), t2 0.6. Gaps 0.5 and 0.2 -> raw weights 2 and 5 -> 2/7, 5/7.
    Agent x: t1 per-model means 0.5, 0.3 -> 0.4; t2 0.7, 0.5 -> 0.6.
    Weighted: 2/7*0.4 + 5/7*0.6 = 3.8/7 = 0.542857. Per repeat: run1 t1 (0.6+0.2)/2=0.4,
    t2 (0.8+0.4)/2=0.6 -> 0.542857; run2 t1 (0.4+0.4)/2=0.4, t2 (0.6+0.6)/2=0.6 -> 0.542857: std 0."""
    rows = []
    for run, (a, b, c, d) in {1: (0.6, 0.2, 0.8, 0.4), 2: (0.4, 0.4, 0.6, 0.6)}.items():
        rows += [
            ("x", "t1", "m1", "1", 0, run, a, "scored"),
            ("x", "t1", "m2", "1", 0, run, b, "scored"),
            ("x", "t2", "m1", "1", 0, run, c, "scored"),
            ("x", "t2", "m2", "1", 0, run, d, "scored"),
        ]
        rows += [
            (("noop", t, m, "1", 0, run, v, "scored")) for t, v in (("t1", 0.1), ("t2", 0.4)) for m in ("m1", "m2")
        ]
    config = {
        "weighting": "inverse_gap",
        "base_agent": "noop",
        "instruct_scores": {"t1": {"m1": 0.5, "m2": 0.7}, "t2": {"m1": 0.6, "m2": 0.6}},
    }
    board, weights = leaderboard(_table(rows), board_settings(**config))
    assert weights.by_task == pytest.approx({"t1": 2 / 7, "t2": 5 / 7})
    x = board[(board["entry"] == "x")].set_index("task")
    assert x.loc["weighted average", "mean"] == pytest.approx(3.8 / 7)
    assert x.loc["weighted average", "std"] == pytest.approx(0.0)
    assert x.loc["t1", "mean"] == pytest.approx(0.4) and x.loc["t1", "n_scored"] == 4
    kinds = board.drop_duplicates("entry").set_index("entry")["kind"]
    assert kinds.to_dict() == {"x": "agent", "noop": "base model", "instruct models (published)": "instruct model"}
    base = board[(board["entry"] == "noop") & (board["task"] == "weighted average")].iloc[0]
    assert base["mean"] == pytest.approx(2 / 7 * 0.1 + 5 / 7 * 0.4)


def test_weights_are_undefined_not_invented_when_instruct_is_not_above_base():
    w = task_weights(board_settings(weighting="inverse_gap", instruct_scores={"t": {"m": 0.3}}), ["t"], {"t": 0.4})
    assert w.by_task == {} and "instruct 0.3000 <= base 0.4000" in w.problem
    w = task_weights(board_settings(weighting="explicit", weights={"a": 1, "b": 3}), ["a", "b"], {})
    assert w.by_task == {"a": 0.25, "b": 0.75}


def test_an_incomplete_task_leaves_the_weighted_average_empty_not_zero():
    rows = [("x", "t1", "m1", "1", 0, 1, 0.5, "scored"), ("x", "t2", "m1", "1", 0, 1, None, "infra_failed")]
    board, _ = leaderboard(_table(rows), board_settings())
    x = board.set_index("task")
    assert x.loc["t2", "n_scored"] == 0 and pd.isna(x.loc["t2", "mean"])
    assert pd.isna(x.loc["weighted average", "mean"]) and not x.loc["weighted average", "complete"]
    md = leaderboard_markdown(
        board, task_weights(board_settings(), ["t1", "t2"], {}), _table(rows).assign(evidence="e")
    )
    assert "| x | 0.500 (1/1) | — (0/1) | — (1/2) |" in md


def test_the_collect_rule_names_its_outputs_as_collect_outputs():
    """The rule's output names are the keys the collect script and `ptb-harness collect`
    look paths up by: a name added to one place only would fail here, not in a campaign."""
    import re

    from conftest import REPO

    from ptb_harness.core.layout import COLLECT_OUTPUTS

    rule = (REPO / "workflow" / "rules" / "collect.smk").read_text()
    outputs = rule.split("output:")[1].split("log:")[0]
    assert re.findall(r"^        (\w+)=", outputs, re.M) == list(COLLECT_OUTPUTS)
    assert re.findall(r'OUT\["(\w+)"\]', outputs) == list(COLLECT_OUTPUTS)


def _fallback_table():
    """Two tasks x two models, one repeat. Base (noop): t1 0.2/0.4, t2 0.1/0.3.
    a: t1 m1 0.6, m2 agent_failed; t2 0.5/0.7. b: t1 0.8/0.6; t2 m1 infra_failed, m2 0.9.
    c and e: 0.5 everywhere (a tie)."""
    cells = {
        "noop": [0.2, 0.4, 0.1, 0.3],
        "a": [0.6, "agent_failed", 0.5, 0.7],
        "b": [0.8, 0.6, "infra_failed", 0.9],
        "c": [0.5] * 4,
        "e": [0.5] * 4,
    }
    rows = []
    for agent, values in cells.items():
        for (task, model), v in zip([("t1", "m1"), ("t1", "m2"), ("t2", "m1"), ("t2", "m2")], values, strict=True):
            scored = isinstance(v, float)
            rows.append((agent, task, model, "1", 0, 1, v if scored else None, "scored" if scored else v))
    return _table(rows).assign(evidence="e")


def test_missing_empty_leaves_a_failed_agents_average_empty_and_ranks_the_rest():
    table = _fallback_table()
    board, weights = leaderboard(table, board_settings(missing="empty"))
    md = leaderboard_markdown(board, weights, table)
    rows = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line][1:6]
    assert rows == [
        "| 1 | c | 0.500 (2/2) | 0.500 (2/2) | 0.500 (4/4) |",
        "| 1 | e | 0.500 (2/2) | 0.500 (2/2) | 0.500 (4/4) |",
        "| — | a | 0.600* (1/2) | 0.600 (2/2) | — (3/4) |",
        "| — | b | 0.700 (2/2) | 0.900* (1/2) | — (3/4) |",
        "|  | base model: noop | 0.300 (2/2) | 0.200 (2/2) | 0.250 (4/4) |",
    ]
    assert "†" not in md and board["n_substituted"].sum() == 0


def test_missing_base_model_counts_agent_failed_cells_as_the_base_score_and_marks_them(tmp_path):
    """a's failed t1/m2 cell counts as the base model's 0.4: t1 (0.6 + 0.4)/2 = 0.5, t2 0.6,
    weighted (equal) 0.55, now first. b's infra_failed cell still leaves its average empty."""
    from ptb_harness.results.leaderboard import leaderboard_html, with_fallback

    table = with_fallback(_fallback_table(), board_settings(missing="base_model"))
    [sub] = table[table["substituted"]].itertuples()
    assert (sub.agent, sub.task, sub.model, sub.score, sub.outcome) == ("a", "t1", "m2", 0.4, "agent_failed")
    assert table.loc[table["outcome"] == "infra_failed", "score"].isna().all()
    board, weights = leaderboard(table, board_settings(missing="base_model"))
    a = board[board["entry"] == "a"].set_index("task")
    assert a.loc["t1", "mean"] == pytest.approx(0.5) and a.loc["weighted average", "mean"] == pytest.approx(0.55)
    assert a.loc["weighted average", "n_substituted"] == 1 and a.loc["t1", "n_scored"] == 1
    md = leaderboard_markdown(board, weights, table)
    rows = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line][1:6]
    assert rows == [
        "| 1 | a | 0.500† (1/2; 1†) | 0.600 (2/2) | 0.550† (3/4; 1†) |",
        "| 2 | c | 0.500 (2/2) | 0.500 (2/2) | 0.500 (4/4) |",
        "| 2 | e | 0.500 (2/2) | 0.500 (2/2) | 0.500 (4/4) |",
        "| — | b | 0.700 (2/2) | 0.900* (1/2) | — (3/4) |",
        "|  | base model: noop | 0.300 (2/2) | 0.200 (2/2) | 0.250 (4/4) |",
    ]
    assert "† = includes cells whose agent failed or that a judge flagged, counted as the base model's score" in md
    page = leaderboard_html(board, weights, table, [])
    assert "<td>0.550† (3/4; 1†)</td>" in page and "class='footnote'" in page
    assert list(board.drop_duplicates("entry")["entry"]) == ["a", "c", "e", "b", "noop"]
    assert board.columns[0] == "rank" and "n_substituted" in board.columns


def test_the_fallback_rule_is_a_function_of_outcome_and_flag():
    from ptb_harness.results.leaderboard import counts_as_base_model

    assert counts_as_base_model("agent_failed") and counts_as_base_model("scored", flagged=True)
    assert not any(counts_as_base_model(o) for o in ("scored", "infra_failed", "pending", "running"))
    assert not counts_as_base_model("infra_failed", flagged=True)


def test_an_instruct_score_equal_to_the_base_leaves_the_weights_undefined():
    """A zero gap has no inverse: the weights are undefined (named), never a division error."""
    w = task_weights(board_settings(weighting="inverse_gap", instruct_scores={"t": {"m": 0.4}}), ["t"], {"t": 0.4})
    assert w.by_task == {} and "instruct 0.4000 <= base 0.4000" in w.problem


def test_a_task_scored_for_some_models_only_is_incomplete():
    """Two models; t2 is scored for m1 only: its mean is shown, the weighted average is not."""
    rows = [
        ("x", "t1", "m1", "1", 0, 1, 0.5, "scored"),
        ("x", "t1", "m2", "1", 0, 1, 0.7, "scored"),
        ("x", "t2", "m1", "1", 0, 1, 0.9, "scored"),
        ("x", "t2", "m2", "1", 0, 1, None, "infra_failed"),
    ]
    board, _ = leaderboard(_table(rows), board_settings())
    x = board.set_index("task")
    assert bool(x.loc["t1", "complete"]) and not bool(x.loc["t2", "complete"])
    assert x.loc["t2", "mean"] == pytest.approx(0.9) and x.loc["t2", "n_models_scored"] == 1
    assert pd.isna(x.loc["weighted average", "mean"])


def test_a_task_mean_is_over_models_not_over_cells():
    """m1 scored in two repeats (0.2, 0.4: mean 0.3), m2 in one (0.9): the task mean is
    (0.3 + 0.9) / 2 = 0.6, not the mean of the three cells (0.5)."""
    rows = [
        ("x", "t", "m1", "1", 0, 1, 0.2, "scored"),
        ("x", "t", "m1", "1", 0, 2, 0.4, "scored"),
        ("x", "t", "m2", "1", 0, 1, 0.9, "scored"),
        ("x", "t", "m2", "1", 0, 2, None, "infra_failed"),
    ]
    board, _ = leaderboard(_table(rows), board_settings())
    x = board.set_index("task")
    assert x.loc["t", "mean"] == pytest.approx(0.6) and x.loc["weighted average", "mean"] == pytest.approx(0.6)
    assert pd.isna(x.loc["t", "std"])  # one complete repeat: no spread to report


def test_the_base_agents_own_failed_cells_never_fall_back_to_themselves():
    """The base row is the reference the fallback draws on: its own failed repeat stays
    empty (and unmarked), not filled with the mean of its other repeats."""
    from ptb_harness.results.leaderboard import with_fallback

    rows = [
        ("noop", "t", "m", "1", 0, 1, 0.3, "scored"),
        ("noop", "t", "m", "1", 0, 2, None, "agent_failed"),
        ("x", "t", "m", "1", 0, 1, None, "agent_failed"),
    ]
    table = with_fallback(_table(rows), board_settings(missing="base_model"))
    assert list(table["substituted"]) == [False, False, True]
    assert pd.isna(table.loc[1, "score"]) and table.loc[2, "score"] == pytest.approx(0.3)


def test_agent_text_stays_in_its_row_of_leaderboard_md_and_cells_csv(tmp_path: Path):
    """A file name with a newline, a forged heading and row, raw HTML, ESC bytes and an
    undecodable byte, as delivery names it in the evidence: one row in each table."""
    import csv

    from conftest import campaign_config, make_workdir
    from markdown_it import MarkdownIt
    from test_status import hostile_cell

    from ptb_harness.campaign.config import load_config_files
    from ptb_harness.core.layout import collect_outputs
    from ptb_harness.results.collect import write_tables

    make_workdir(tmp_path, campaign_config(runs=[1, 2]))
    hostile_cell(tmp_path)
    campaign = load_config_files(tmp_path)
    paths = collect_outputs(campaign.results_dir)
    write_tables(campaign, paths)
    md = paths["leaderboard_md"].read_text()
    assert b"\x1b" not in paths["leaderboard_md"].read_bytes() and "<img" not in md and "\r" not in md
    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings == ["Leaderboard", "Cells without a score"]  # no forged heading
    rows = [t for t in tokens if t.type == "tr_open"]
    assert len(rows) == 2 + 3  # the leaderboard (head, exit0), the unscored cells (head, 2 cells)
    unscored = md.split("## Cells without a score", 1)[1].strip().splitlines()
    assert len(unscored) == 4 and all(line.startswith("| exit0 | fake | m1 |") for line in unscored[2:])
    with open(paths["cells"], newline="") as f:
        rows = list(csv.reader(f))
    assert len(rows) == 3 and {len(r) for r in rows} == {len(rows[0])}
    assert len(paths["cells"].read_text().splitlines()) == 3 and b"\x1b" not in paths["cells"].read_bytes()


def test_the_leaderboard_shows_each_entrys_gateway_cost_per_cell_unknown_never_0():
    """a: its gateway metered 0.25 and 0.75 on two cells, two not known (an unpriced model);
    b: no gateway (its trace's cost does not count); c: every cell 0.01; e: none known."""
    from ptb_harness.results.leaderboard import COST, leaderboard_html

    table = _fallback_table()
    source = {"a": "gateway", "b": "trace", "c": "gateway", "e": "gateway", "noop": None}
    cost = {"a": [0.25, 0.75, None, None], "b": [1.0] * 4, "c": [0.01] * 4, "e": [None] * 4, "noop": [None] * 4}
    table["usage_source"] = table["agent"].map(source)
    nth = table.groupby("agent").cumcount()
    table["cost_usd"] = [cost[agent][i] for agent, i in zip(table["agent"], nth, strict=True)]
    board, weights = leaderboard(table, board_settings(missing="empty"))
    md = leaderboard_markdown(board, weights, table)
    lines = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line]
    assert lines[0].endswith(f"| weighted average | {COST} |")
    assert lines[1:6] == [
        "| 1 | c | 0.500 (2/2) | 0.500 (2/2) | 0.500 (4/4) | $0.01 |",
        "| 1 | e | 0.500 (2/2) | 0.500 (2/2) | 0.500 (4/4) | unknown |",
        "| — | a | 0.600* (1/2) | 0.600 (2/2) | — (3/4) | $0.50 (2 of 4 cells) |",
        "| — | b | 0.700 (2/2) | 0.900* (1/2) | — (3/4) | unknown |",
        "|  | base model: noop | 0.300 (2/2) | 0.200 (2/2) | 0.250 (4/4) |  |",
    ]
    assert "unknown: no cell's cost is known" in md
    assert "<td>$0.50 (2 of 4 cells)</td>" in leaderboard_html(board, weights, table, [])
    # a campaign without any gateway has no such column
    plain = leaderboard_markdown(*leaderboard(_fallback_table(), board_settings(missing="empty")), _fallback_table())
    assert COST not in plain


def test_the_cell_table_is_the_same_with_its_index_without_it_and_after_cells_change_under_it(tmp_path: Path):
    """collect's index serves a scored cell's row only while the files it was read from
    keep their identity: a record rewritten in place with the same size and mtime (its
    ctime moves), a usage.json and a benchmark added, a judgement that flags a cell, a
    metrics.json removed, a broken index: each time the table with the index equals the
    table without it, and a second table of an unchanged campaign reads no record."""
    from unittest import mock

    from conftest import rewrite_in_place, scored_campaign

    from ptb_harness.results import outcome
    from ptb_harness.results.collect import COLLECT_INDEX

    campaign, dirs = scored_campaign(tmp_path, 6)

    def both() -> pd.DataFrame:
        with_index = cell_table(campaign)
        pd.testing.assert_frame_equal(with_index, cell_table(campaign, use_index=False))
        return with_index

    first = both()
    assert (campaign.results_dir / COLLECT_INDEX).is_file() and set(first["outcome"]) == {"scored"}
    with mock.patch.object(outcome, "read_cell", side_effect=AssertionError("a record was read")):
        pd.testing.assert_frame_equal(cell_table(campaign), first)  # served from the index
    # rewritten in place: same size, mtime set back (the ctime cannot be)
    rewrite_in_place(dirs[0] / "metrics.json", json.dumps({"accuracy": 0.7}))
    after = both()
    assert after["outcome"][0] != "scored" and after.iloc[1:].equals(first.iloc[1:])
    # usage and a benchmark appear; a judgement flags a cell; a metrics.json goes
    (dirs[1] / "usage.json").write_text(json.dumps({"input_tokens": 7, "source": "trace"}))
    (dirs[1] / "solve.benchmark.tsv").write_text("s\th:m:s\tmax_rss\tcpu_time\n12.5\t0:00:12\t100.0\t3.0\n")
    (dirs[2] / "judgement.json").write_text(json.dumps({"verdict": "flagged"}))
    (dirs[3] / "metrics.json").unlink()
    after = both()
    assert after["input_tokens"][1] == 7 and after["solve_wall_s"][1] == 12.5
    assert after["flagged"][2] and after["outcome"][3] != "scored"
    assert after.iloc[4:].to_csv() == first.iloc[4:].to_csv()  # the same rows (a column's dtype follows row 1)
    # a broken index is ignored and rewritten
    (campaign.results_dir / COLLECT_INDEX).write_text("{not json")
    pd.testing.assert_frame_equal(both(), after)
    assert json.loads((campaign.results_dir / COLLECT_INDEX).read_text())["cells"]


def test_a_collect_index_edited_by_hand_is_a_miss_never_a_row(tmp_path: Path):
    """Entries under the current key whose fields are not exactly a row's read columns (a
    column added, one missing, a list for a scalar, an outcome other than scored): each is
    read as no entry, and the table equals the table without the index."""
    from conftest import scored_campaign

    from ptb_harness.results.collect import COLLECT_INDEX

    campaign, _ = scored_campaign(tmp_path, 4)
    path = campaign.results_dir / COLLECT_INDEX
    plain = cell_table(campaign, use_index=False)
    pd.testing.assert_frame_equal(cell_table(campaign), plain)  # writes the index
    written = json.loads(path.read_text())
    forged = json.loads(path.read_text())
    edits = [
        lambda f: f.update(cell_dir="/etc"),
        lambda f: f.pop("accuracy"),
        lambda f: f.update(accuracy=[1.0]),
        lambda f: f.update(outcome="agent_failed", accuracy=1.0),
    ]
    for rel, edit in zip(forged["cells"], edits, strict=True):
        edit(forged["cells"][rel][1])
    path.write_text(json.dumps(forged))
    pd.testing.assert_frame_equal(cell_table(campaign), plain)
    assert json.loads(path.read_text())["cells"] == written["cells"]
