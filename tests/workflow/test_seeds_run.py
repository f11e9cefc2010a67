"""PostTrainBench v1.2's final evaluation through the harness: one real Snakemake run of two
gsm8k cells, each scored by the real gsm8k scorer (ptb_scorer on inspect_ai, transformers
backend, CPU) with the campaign's five default seeds, on the tiny Llama 3-shaped base model
the real-task test uses (tests/scorer/family_models.py; its generation config names no
temperature, so it samples at 1.0 and every seed runs), offline on the fixture rows. The
ladder is shortened to two steps (caps 3 and 2) and `--limit 2`.

Stand-in: a seed's failure. Each task's evaluate.py is the real one behind a wrapper that
makes the runs of the seeds named in its fail_seeds.json raise EngineFailed (what a run
that inspect ended with an error raises), at every cap or at the caps named. Everything
else is real: the plan of attempts, the one model load per attempt, the files, the mean.

- gsm8k: seed 87681 fails at the first cap (scores in the second attempt), 38992 fails at
  every cap (left out of the mean): 4 of 5 seeds, the model loaded once per attempt.
- gsm8k_first_fails: the first seed fails at every cap (a one-step ladder): no
  metrics.json, the other seeds never run, the cell's outcome is that of a scorer that
  gave no metrics.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import REPO, campaign_config, snakemake, write_agent, write_config

sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "scorer"))
from family_models import build_family_model
from scorer_fixtures import write_fixture_cache

from ptb_scorer.seeds import FINAL_EVAL_SEEDS

pytestmark = pytest.mark.slow

FIRST, SECOND, THIRD, FOURTH, FIFTH = FINAL_EVAL_SEEDS
WRAPPER = '''"""gsm8k's real evaluate.py, with a stand-in failure of the seeds in fail_seeds.json."""
import json
from pathlib import Path

from ptb_scorer import engine
from ptb_scorer.cli import run

FAIL = json.loads((Path(__file__).parent / "fail_seeds.json").read_text())  # {seed: [caps] or null: every cap}
real_run_task = engine.run_task


def run_task(task, spec, *, run_seed=None, **kw):
    if str(run_seed) in FAIL and FAIL[str(run_seed)] in (None, [spec.generate["max_tokens"]]):
        raise engine.EngineFailed(f"stand-in failure of seed {run_seed}")
    return real_run_task(task, spec, run_seed=run_seed, **kw)


engine.run_task = run_task
run("gsm8k")
'''
TASKS = {"gsm8k": {str(SECOND): [3], str(THIRD): None}, "gsm8k_first_fails": {str(FIRST): None}}
#: the ladder of each task (short: CI time); the first-fails cell's is one step (the plan's
#: own table tests climb upstream's nine)
LADDERS = {"gsm8k": [{"attempts": 1, "max_tokens": 3}, {"attempts": 1, "max_tokens": 2}],
           "gsm8k_first_fails": [{"attempts": 1, "max_tokens": 3}]}  # fmt: skip


def cell(wd, task: str):
    return wd / "results" / "cells" / "copy_base" / task / "tiny" / "0.0005h-0gpu-run1"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seeds")
    wd = tmp / "wd"
    build_family_model("llama3", wd / "models" / "tiny")
    write_agent(wd, "copy_base", 'set -eu\ncp -r "$MODEL_TO_TRAIN" final_model\n')
    for task, fail in TASKS.items():
        shutil.copytree(REPO / "tasks" / "gsm8k", wd / "tasks" / task, symlinks=False)
        info = json.loads((wd / "tasks" / task / "info.json").read_text())
        info["evaluate"].update(ladder=LADDERS[task], extra_args=["--limit", "2"])
        (wd / "tasks" / task / "info.json").write_text(json.dumps(info))
        (wd / "tasks" / task / "evaluate.py").write_text(WRAPPER)
        (wd / "tasks" / task / "fail_seeds.json").write_text(json.dumps(fail))
    config = campaign_config(agents=["copy_base"], tasks=list(TASKS), models=[{"name": "tiny", "path": "models/tiny"}])
    write_config(wd, config)  # evaluate.seeds: the schema's default, upstream's five
    profile = tmp / "profile"
    profile.mkdir()
    shutil.copy(REPO / "profiles/local/config.yaml", profile / "config.yaml")
    site = {"site": {"hf_home": str(write_fixture_cache(tmp / "hf", ("gsm8k",))), "hf_cache_mode": "ro"}}
    (profile / "site.yaml").write_text(yaml.safe_dump(site))
    run = snakemake(wd, profile_dir=profile, timeout=900)
    collect = subprocess.run(
        [sys.executable, "-m", "ptb_harness", "collect", "--workdir", str(wd), "--profile", str(profile)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert collect.returncode == 0, collect.stderr[-3000:]
    return wd, run


def test_five_seeds_one_load_per_attempt_a_failed_seed_left_out(campaign):
    wd, run = campaign
    d = cell(wd, "gsm8k")
    metrics = json.loads((d / "metrics.json").read_text())
    assert (metrics["num_seeds"], metrics["num_seeds_succeeded"]) == (5, 4), run.stderr[-3000:]
    per_seed = metrics["per_seed"]
    assert list(per_seed) == [str(s) for s in (FIRST, SECOND, FOURTH, FIFTH)]  # THIRD failed everywhere
    assert {s: v["max_tokens_stage"] for s, v in per_seed.items()} == {
        str(FIRST): 0,
        str(SECOND): 1,  # failed at the first cap, scored at the second
        str(FOURTH): 0,
        str(FIFTH): 0,
    }
    accuracies = [v["metrics"]["accuracy"] for v in per_seed.values()]
    assert metrics["accuracy"] == pytest.approx(sum(accuracies) / 4)
    assert [v["metrics"]["max_tokens"] for v in per_seed.values()] == [3, 2, 3, 3]
    assert metrics["decoding"] == {"temperature": 1.0, "greedy": False} and metrics["engine"] == "hf"
    assert metrics["n_examples"] == 2 and metrics["matcher"]["name"] == "last_number_exact/v1"

    record = json.loads((d / "evaluate.json").read_text())
    assert record["status"] == "scored" and record["accuracy"] == metrics["accuracy"]
    assert record["seeds"]["evaluated"] == list(FINAL_EVAL_SEEDS) and record["seeds"]["policy"] == "unless_greedy"
    assert record["seeds"]["outcomes"][str(THIRD)] == {
        "status": "failed",
        "problem": f"EngineFailed: stand-in failure of seed {THIRD}",
    }
    first, second = record["attempts"]
    assert (first["seeds"], first["max_tokens"]) == (list(FINAL_EVAL_SEEDS), 3)
    assert first["seeds_scored"] == [FIRST, FOURTH, FIFTH] and sorted(first["seeds_failed"]) == sorted(
        [str(SECOND), str(THIRD)]
    )
    assert (second["seeds"], second["max_tokens"], second["seeds_scored"]) == ([SECOND, THIRD], 2, [SECOND])
    # one model load served every seed of an attempt: counted from the scorer's own lines
    for attempt in (first, second):
        log = (d / attempt["log"]).read_text()
        assert attempt["model_loads"] == 1 and log.count("PTB_MODEL_LOADED") == 1
        assert f"--seeds {','.join(map(str, attempt['seeds']))}" in log
    assert "--first-seed-gates" in (d / first["log"]).read_text()
    assert "--first-seed-gates" not in (d / second["log"]).read_text()

    # the leaderboard's cell score is the mean; the viewer shows every seed
    (row,) = [r for r in csv.DictReader((wd / "results/tables/cells.csv").open()) if r["task"] == "gsm8k"]
    assert float(row["score"]) == pytest.approx(metrics["accuracy"])
    html = (wd / "results" / "viewer" / "cells" / f"copy_base.gsm8k.tiny.{d.name}.html").read_text()
    assert "<h2>Seeds</h2>" in html and "the mean over 4 of 5 seeds" in html
    rows = html.split("<table id='seeds'>")[1].split("</table>")[0].split("<tr>")[2:]
    assert [r.split("</td>")[0] for r in rows] == [f"<td>{s}" for s in FINAL_EVAL_SEEDS]  # the seeds' order
    second_row = f"<td>{SECOND}</td><td>scored</td><td>1</td><td>{per_seed[str(SECOND)]['metrics']['accuracy']}</td>"
    assert rows[1].startswith(second_row)
    assert rows[2].startswith(f"<td>{THIRD}</td><td>failed</td>") and f"stand-in failure of seed {THIRD}" in rows[2]


def test_first_seed_failing_everywhere_leaves_no_score(campaign):
    wd, run = campaign
    d = cell(wd, "gsm8k_first_fails")
    assert not (d / "metrics.json").exists()
    record = json.loads((d / "evaluate.json").read_text())
    assert record["status"] == "failed" and f"the first seed ({FIRST}) scored in none" in record["reason"]
    assert [a["max_tokens"] for a in record["attempts"]] == [3]
    for attempt in record["attempts"]:
        log = (d / attempt["log"]).read_text()
        # the others waited: none of them ran
        assert attempt["seeds_scored"] == [] and "PTB_SEED_SCORED" not in log
        assert f"PTB_SEED_FAILED: {FIRST}: EngineFailed: stand-in failure" in log
        assert not any(f"seed {s}" in log for s in (SECOND, THIRD, FOURTH, FIFTH))
    assert {s: o["status"] for s, o in record["seeds"]["outcomes"].items()} == {
        str(FIRST): "failed",
        **{str(s): "not run" for s in (SECOND, THIRD, FOURTH, FIFTH)},
    }
    # the outcome of a scorer that gave no metrics, as without seeds
    (row,) = [r for r in csv.DictReader((wd / "results/tables/cells.csv").open()) if r["task"] == "gsm8k_first_fails"]
    assert row["outcome"] == "infra_failed" and row["score"] == ""
    assert row["evidence"].startswith("scorer: no valid metrics after 1 attempts; the first seed (72332)")
