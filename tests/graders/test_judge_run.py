"""A real Snakemake run of a graded task with the judge on, against the stand-in grader
server (tests/grader_standin.py): the grader key planted in the environment appears
only in the stand-in's auth header, never in the agent's environment, trace, results
or the judge's inputs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from conftest import campaign_config, cell_dir, make_workdir, snakemake, write_agent, write_config, write_task
from grader_standin import StandInGrader
from test_judge import CLEAN, JUDGE_REQUESTS, TEST_QUESTIONS
from test_keys import GRADED_EVALUATE

from ptb_harness.core.cell_files import stage_benchmark
from ptb_harness.results.stage_benchmarks import read_benchmark

KEY = "sk-planted-e2e-grader-key-0123456789abcdef"
# an agent that shows everything it can see: its environment, into its trace and a file
SNOOP = """
    env | sort
    env | sort > env_dump.txt
    grep -r . "$HOME" --include='*.json' -l 2>/dev/null | head -20
    mkdir -p final_model && echo '{"score": 0.75}' > final_model/config.json
    printf '{"q": "What is 2 plus 2?"}\\n' > train.jsonl
"""


def grader_or_judge(req):
    system = ((req.body or {}).get("messages") or [{}])[0].get("content", "")
    return ("answer", CLEAN) if "You audit one run" in system else ("answer", "good")


@pytest.mark.slow
def test_graded_cell_with_judge_and_the_key_only_in_the_auth_header(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PTB_GRADER_API_KEY", KEY)
    root = make_workdir(tmp_path / "campaign")
    write_agent(root, "snoop", SNOOP)
    info = {"uses_grader": True, "judge": {"test_set": {"path": "test.jsonl", "fields": ["question"]}}}
    write_task(root, "graded", GRADED_EVALUATE, info)
    (root / "tasks" / "graded" / "test.jsonl").write_text(
        "".join(json.dumps({"question": q}) + "\n" for q in TEST_QUESTIONS)
    )
    with StandInGrader(default=grader_or_judge) as server:
        endpoint = {"base_url": server.base_url, "model": "standin", "backoff_seconds": 0.01}
        write_config(
            root,
            campaign_config(
                agents=["snoop"], tasks=["graded"], grader=endpoint, judge={"enabled": True, "endpoint": endpoint}
            ),
        )
        run = snakemake(root)
    assert run.returncode == 0, run.stderr[-3000:]
    cdir = cell_dir(root, "snoop", "graded")
    judgement = json.loads((cdir / "judgement.json").read_text())
    assert judgement["verdict"] == "clean", judgement
    metrics = json.loads((cdir / "metrics.json").read_text())
    assert metrics["accuracy"] == 1.0 and metrics["grader"]["requests"] == 3
    # what the agent saw: no grader key, not even its name
    dump = (cdir / "agent_files" / "task" / "env_dump.txt").read_text()
    assert "PTB_GRADER" not in dump and "PATH=" in dump
    assert "PTB_GRADER_API_KEY" not in (cdir / "solve_out.txt").read_text()
    # the judge read the agent's files and transcript
    judge_req = [r for r in server.requests if "You audit one run" in r.text]
    assert len(judge_req) == JUDGE_REQUESTS and all("env_dump.txt" in r.text for r in judge_req)
    # the key's value: in every request's auth header, in no body and in no file of the campaign
    assert len(server.requests) == 3 + JUDGE_REQUESTS
    for r in server.requests:
        assert r.headers["authorization"] == f"Bearer {KEY}"
        assert KEY not in json.dumps(r.body)
    leaks = [p for p in root.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaks == []
    # collect ran after the judge, and summed the judge's benchmarked hours with the others
    assert (root / "results" / "tables" / "leaderboard.md").exists()
    assert read_benchmark(cdir / stage_benchmark("judge"))["wall_s"] > 0
    hours = {(r["stage"], r["outcome"]): r for r in csv.DictReader((root / "results/tables/stage_hours.csv").open())}
    assert hours["judge", "all"]["measured"] == "1" and float(hours["judge", "all"]["wall_h"]) > 0
