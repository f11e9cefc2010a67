"""The grader key reaches the scorer (and the stand-in grader's auth header) and never an
agent; a graded scorer whose grader fails names the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO, campaign_config, make_workdir, write_agent, write_config, write_task
from grader_standin import StandInGrader

from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.config import load_config_files
from ptb_harness.core.errors import ConfigError, HarnessError
from ptb_harness.stages.evaluate import run_evaluate

KEY = "sk-planted-grader-key-0123456789abcdef"

# A graded task's scorer, as tasks/<t>/evaluate.py would be: the endpoint from PTB_GRADER,
# the key from its variable, failures through fail_attempt.
GRADED_EVALUATE = f"""
    import argparse, json, os, sys
    sys.path.insert(0, {str(REPO / "src")!r})  # the tree under test (the sandbox drops PYTHONPATH)
    from ptb_scorer.llm_client import Endpoint, LLMClient, LLMUnavailable
    from ptb_scorer.protocol import fail_attempt
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path"); ap.add_argument("--json-output-file"); ap.add_argument("--max-tokens")
    a = ap.parse_args()
    print("env names:", sorted(os.environ))
    try:
        with LLMClient(Endpoint.from_environ()) as grader:
            verdicts = [grader.chat([{{"role": "user", "content": f"grade {{i}}"}}]) for i in range(3)]
    except LLMUnavailable as e:
        fail_attempt(e)
    acc = sum(v == "good" for v in verdicts) / len(verdicts)
    json.dump({{"accuracy": acc, "grader": grader.call_stats()}}, open(a.json_output_file, "w"))
"""


def graded_workdir(tmp_path: Path, url: str, **grader) -> Path:
    root = make_workdir(tmp_path / "campaign")
    write_task(
        root,
        "graded",
        GRADED_EVALUATE,
        {"uses_grader": True, "evaluate": {"ladder": [{"attempts": 2, "max_tokens": None}]}},
    )
    cfg = campaign_config(
        tasks=["graded"], grader={"base_url": url, "model": "standin", "backoff_seconds": 0.01, **grader}
    )
    write_config(root, cfg)
    return root


def score(root: Path, env: dict) -> tuple[dict, Path]:
    campaign = load_config_files(root)
    cell = Cell("exit0", "graded", "m1", "0.0005", 0, 1)
    cdir = campaign.cell_dir(cell)
    (cdir / "final_model").mkdir(parents=True)
    (cdir / "final_model" / "config.json").write_text("{}")
    (cdir / "solve.json").write_text(json.dumps({"final_model_files": 1, "description": "exited with code 0"}))
    record = run_evaluate(
        campaign,
        cell,
        solve_json=cdir / "solve.json",
        final_model=cdir / "final_model",
        metrics_json=cdir / "metrics.json",
        host_env=env,
    )
    return record, cdir


def test_graded_scorer_gets_the_endpoint_and_key_retries_are_counted(tmp_path: Path):
    script = [("status", 429), ("status", 500), ("answer", "good"), ("answer", "good"), ("answer", "bad")]
    with StandInGrader(script=script) as server:
        root = graded_workdir(tmp_path, server.base_url)
        record, cdir = score(root, {"PATH": "/usr/bin:/bin", "PTB_GRADER_API_KEY": KEY})
    assert record["status"] == "scored"
    metrics = json.loads((cdir / "metrics.json").read_text())
    assert metrics["accuracy"] == pytest.approx(2 / 3)
    assert metrics["grader"]["requests"] == 5 and metrics["grader"]["retries"] == 2
    assert metrics["grader"]["statuses"] == {"200": 3, "429": 1, "500": 1}
    assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {KEY}"}
    # the key's value is on no file of the cell (its name is, in the scorer's env listing)
    for f in cdir.rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f


def test_a_grader_that_never_answers_fails_the_attempt_with_its_reason(tmp_path: Path):
    with StandInGrader(default=lambda req: ("hang", 3)) as server:
        root = graded_workdir(tmp_path, server.base_url, timeout_seconds=0.2, max_retries=1)
        with pytest.raises(HarnessError, match="no valid metrics after 2 attempts"):
            score(root, {"PATH": "/usr/bin:/bin", "PTB_GRADER_API_KEY": KEY})
        cdir = load_config_files(root).cell_dir(Cell("exit0", "graded", "m1", "0.0005", 0, 1))
    record = json.loads((cdir / "evaluate.json").read_text())
    assert record["status"] == "failed" and not (cdir / "metrics.json").exists()
    assert all(
        a["problem"].startswith("grader failed: grader standin at http://127.0.0.1:") for a in record["attempts"]
    )
    assert "no answer within 0.2 s" in record["reason"]
    # it reads as the infrastructure's failure, not the model's
    from ptb_harness.results.outcome import cell_outcome

    outcome, evidence, _ = cell_outcome(cdir)
    assert outcome == "infra_failed" and "grader failed" in evidence


def test_a_grader_key_an_agent_would_receive_is_a_config_error(tmp_path: Path):
    root = make_workdir(tmp_path / "campaign")
    write_agent(root, "leaky", "true\n")
    (root / "agents" / "leaky" / "api_keys.json").write_text('["OPENAI_API_KEY"]')
    write_config(root, campaign_config(agents=["leaky"], grader={"api_key_env": "OPENAI_API_KEY"}))
    with pytest.raises(ConfigError, match="grader.api_key_env: OPENAI_API_KEY would reach agent leaky"):
        load_config_files(root)
    # the judge's key too, and through a task's required_api_keys
    write_task(root, "keyed", "pass\n", {"required_api_keys": ["JUDGE_KEY"]})
    write_config(
        root, campaign_config(tasks=["keyed"], judge={"enabled": True, "endpoint": {"api_key_env": "JUDGE_KEY"}})
    )
    with pytest.raises(ConfigError, match="judge.endpoint.api_key_env: JUDGE_KEY would reach agent exit0 in task"):
        load_config_files(root)


def test_the_site_says_where_the_endpoint_is(tmp_path: Path):
    root = make_workdir(tmp_path / "campaign")
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "site.yaml").write_text(
        "site:\n  grader_endpoint: {base_url: 'http://vllm07:8000/v1', api_key_env: null, concurrency: 32}\n"
    )
    write_config(root, campaign_config(grader={"model": "Qwen/Qwen3-32B", "api_key_env": "MY_KEY"}))
    ep = load_config_files(root, profile).settings.grader
    # where from the site (a null keeps the campaign's), what from the campaign
    assert (ep.base_url, ep.concurrency, ep.model, ep.api_key_env) == (
        "http://vllm07:8000/v1",
        32,
        "Qwen/Qwen3-32B",
        "MY_KEY",
    )
