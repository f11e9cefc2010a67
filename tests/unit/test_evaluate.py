import json
from pathlib import Path

import pytest

from ptb_harness.core.errors import HarnessError
from ptb_harness.core.records import check_metrics


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b'{"accuracy": 0.5}', ""),
        (b'{"accuracy": 0, "stderr": 0.1}', ""),
        (b'{"accuracy": 1}', ""),
        (b'{"accuracy": 0.5', "not valid JSON"),
        (b"", "not valid JSON"),
        (b"[0.5]", "not a JSON object"),
        (b'{"acc": 0.5}', "no numeric 'accuracy'"),
        (b'{"accuracy": "0.5"}', "no numeric 'accuracy'"),
        (b'{"accuracy": true}', "no numeric 'accuracy'"),
        (b'{"accuracy": null}', "no numeric 'accuracy'"),
        (b'{"accuracy": 1.5}', "outside [0, 1]"),
        (b'{"accuracy": -0.1}', "outside [0, 1]"),
        (b'{"accuracy": NaN}', "outside [0, 1]"),
    ],
)
def test_check_metrics(data, problem):
    metrics, why = check_metrics(data)
    assert (metrics is None) == bool(problem)
    assert problem in why


# -- the stage itself: what reaches metrics.json, and what reaches evaluate.py ----------------
# Through Snakemake a failed job's outputs are deleted, which would hide a metrics.json
# written before it was checked; these call the stage directly (as tests/faults does).

SCORER_WRITING = """
    import argparse, pathlib, sys
    print("argv:", " ".join(sys.argv[1:]))
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path"); ap.add_argument("--json-output-file"); ap.add_argument("--max-tokens")
    a = ap.parse_args()
    pathlib.Path(a.json_output_file).write_text({text!r})
"""
ONE_ATTEMPT = {"evaluate": {"ladder": [{"attempts": 1, "max_tokens": None}]}}


def _scored_cell(tmp_path, task: str, scorer: str, info: dict, **config):
    """A campaign with one solved cell (final model present) of ``task``: (campaign, cell, its dir)."""
    from conftest import campaign_config, make_workdir, write_task

    from ptb_harness.campaign.cells import Cell
    from ptb_harness.campaign.config import load_config_files

    root = make_workdir(tmp_path / "campaign", campaign_config(tasks=[task], **config))
    write_task(root, task, scorer, info)
    cell_dir = root / "results" / "cells" / "exit0" / task / "m1" / "0.0005h-0gpu-run1"
    (cell_dir / "final_model").mkdir(parents=True)
    (cell_dir / "final_model" / "config.json").write_text("{}")
    (cell_dir / "solve.json").write_text(json.dumps({"final_model_files": 1, "description": "exited with code 0"}))
    return load_config_files(root), Cell("exit0", task, "m1", "0.0005", 0, 1), cell_dir


def _evaluate(campaign, cell, cell_dir):
    from ptb_harness.stages.evaluate import run_evaluate

    return run_evaluate(
        campaign,
        cell,
        solve_json=cell_dir / "solve.json",
        final_model=cell_dir / "final_model",
        metrics_json=cell_dir / "metrics.json",
    )


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        ('{"accuracy": 1.5}', "'accuracy' 1.5 is outside [0, 1]"),
        ('{"accuracy": NaN}', "'accuracy' nan is outside [0, 1]"),
        ('{"accuracy": 0.5, "samples": [{"id": 1', "not valid JSON"),
    ],
    ids=["above-one", "nan", "cut-off"],
)
def test_invalid_scorer_output_is_an_error_and_never_metrics_json(tmp_path, written, problem):
    campaign, cell, cell_dir = _scored_cell(tmp_path, "bad", SCORER_WRITING.format(text=written), ONE_ATTEMPT)
    with pytest.raises(HarnessError, match="no valid metrics after 1 attempts"):
        _evaluate(campaign, cell, cell_dir)
    assert not (cell_dir / "metrics.json").exists()
    assert [p.name for p in cell_dir.glob("*metrics*")] == []  # nor a temp file left beside it
    record = json.loads((cell_dir / "evaluate.json").read_text())
    assert record["status"] == "failed" and record["attempts"][0]["problem"].startswith(problem)


def test_valid_scorer_output_becomes_metrics_json_byte_for_byte(tmp_path):
    written = '{"accuracy": 0.25, "stderr": 0.01}'
    campaign, cell, cell_dir = _scored_cell(tmp_path, "good", SCORER_WRITING.format(text=written), ONE_ATTEMPT)
    assert _evaluate(campaign, cell, cell_dir)["accuracy"] == 0.25
    assert (cell_dir / "metrics.json").read_text() == written


def test_each_ladder_step_gives_evaluate_py_its_token_cap(tmp_path):
    """The argv of every attempt, as evaluate.py saw it (it prints it into its attempt log)."""
    from conftest import BROKEN_EVALUATE, BROKEN_LADDER

    campaign, cell, cell_dir = _scored_cell(tmp_path, "broken", BROKEN_EVALUATE, BROKEN_LADDER)
    with pytest.raises(HarnessError, match="no valid metrics after 4 attempts"):
        _evaluate(campaign, cell, cell_dir)
    record = json.loads((cell_dir / "evaluate.json").read_text())
    assert [a["max_tokens"] for a in record["attempts"]] == [None, None, 100, 50]
    argvs = [
        next(line for line in (cell_dir / a["log"]).read_text().splitlines() if "argv:" in line).split("argv: ")[1]
        for a in record["attempts"]
    ]
    assert ["--max-tokens" in argv for argv in argvs] == [False, False, True, True]
    assert argvs[2].endswith("--max-tokens 100") and argvs[3].endswith("--max-tokens 50")


@pytest.mark.parametrize(
    ("token_flag", "extra", "cap", "tail"),
    [
        ("--max-tokens", (), 512, ["--max-tokens", "512"]),
        ("--max-new-tokens", ("--limit", "-1"), 64, ["--limit", "-1", "--max-new-tokens", "64"]),
        ("--max-tokens", ("--limit", "-1"), None, ["--limit", "-1"]),
    ],
)
def test_evaluate_argv_carries_the_cap_under_the_tasks_flag(tmp_path, token_flag, extra, cap, tail):
    from ptb_harness.campaign.tasks import TaskSpec
    from ptb_harness.stages.scorer_job import evaluate_argv

    task = TaskSpec("t", tmp_path, "b", (), (), token_flag, extra, None)
    argv = evaluate_argv(task, Path("/m"), Path("/o.json"), cap)
    assert argv == ["python", "evaluate.py", "--model-path", "/m", "--json-output-file", "/o.json", *tail]


#: a scorer that reports the attention kernels the harness handed it
KERNELS_SEEN = """
    import argparse, json, os
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path"); ap.add_argument("--json-output-file")
    a = ap.parse_args()
    seen = os.environ.get("PTB_SDPA_KERNELS")
    open(a.json_output_file, "w").write(json.dumps({"accuracy": 0.5, "kernels": seen}))
"""


@pytest.mark.parametrize(
    ("evaluate", "handed"),
    [({}, "flash,efficient,math"), ({"sdpa_kernels": ["cudnn", "flash"]}, "cudnn,flash")],
    ids=["default", "campaign"],
)
def test_the_scorer_is_handed_the_campaigns_attention_kernels(tmp_path, evaluate, handed):
    """evaluate.sdpa_kernels reaches the scorer's environment (PTB_SDPA_KERNELS); by
    default cuDNN's attention is not among them."""
    campaign, cell, cell_dir = _scored_cell(tmp_path, "k", KERNELS_SEEN, ONE_ATTEMPT, evaluate=evaluate)
    _evaluate(campaign, cell, cell_dir)
    assert json.loads((cell_dir / "metrics.json").read_text())["kernels"] == handed
