"""Claude Code, the real CLI at its pinned version, runs real cells through Snakemake
against the scripted model server (a test stand-in for the Anthropic API)."""

from __future__ import annotations

import json
import secrets

import pytest
from agent_env import cli_bin, files_containing, processes_under, run_agent_cell
from scripted_server import Plan

pytestmark = pytest.mark.slow

MODEL = "claude-stand-in-1"
COPY_MODEL = 'cp -r "$MODEL_TO_TRAIN" final_model && ls final_model'


def usage(i: int, o: int, c: int) -> dict:
    return {"usage": {"input_tokens": i, "output_tokens": o, "cached_tokens": c}}


def run(tmp_path, steps, hours=0.01, entry=None, solve=None):
    cli_bin("claude")
    key = f"sk-ant-planted-{secrets.token_hex(12)}"
    plan = Plan(MODEL, steps)
    result = run_agent_cell(
        tmp_path,
        "claude",
        {"name": "claude-test", "model": MODEL, **(entry or {})},
        plan,
        ["anthropic"],
        secrets={"ANTHROPIC_API_KEY": key},
        base_url_env={"ANTHROPIC_BASE_URL": "{url}"},
        hours=hours,
        solve=solve,
    )
    return result, key


def assert_key_only_in_auth_header(result, key):
    requests = result.server.recorded()
    assert requests, "the CLI never called the model server"
    for r in requests:
        assert r.headers.get("x-api-key") == key
        assert key.encode() not in r.body
        assert all(key not in v for k, v in r.headers.items() if k != "x-api-key")
    for root in (result.workdir, result.job_root):
        assert files_containing(root, key) == []


def assert_no_other_host(result):
    # every proxy variable pointed at a recording stand-in; a request to any host but
    # the model server (telemetry, updates, ...) would have gone there
    assert [f"{r.method} {r.path}" for r in result.proxy.recorded()] == []
    assert {r.path.split("?")[0] for r in result.server.recorded()} == {"/v1/messages"}


def test_claude_code_runs_a_tool_call_and_the_cell_is_scored(tmp_path):
    steps = [{"shell": COPY_MODEL, **usage(1200, 40, 300)}, {"text": "final_model is saved.", **usage(1500, 9, 1000)}]
    result, key = run(tmp_path, steps)
    assert result.snakemake.returncode == 0, result.snakemake.stderr[-3000:]
    solve = result.json("solve.json")
    assert (solve["status"], solve["exit_code"], solve["final_model_present"]) == ("exited", 0, True)
    assert (result.cell / "final_model" / "config.json").exists()  # the tool call really ran
    assert result.json("metrics.json")["accuracy"] == 0.75  # scored from the copied model

    raw = (result.cell / "solve_out.txt").read_text()
    assert '"claude_code_version":"2.1.332"' in raw.replace(" ", "")  # the CLI's own stream-json
    parsed = (result.cell / "solve_parsed.txt").read_text()
    assert "claude" in parsed.splitlines()[0].lower() and "TOOL CALL Bash" in parsed
    sent = result.plan.total_sent()
    assert result.json("usage.json") | {} == {
        **result.json("usage.json"),
        "input_tokens": sent["input_tokens"],
        "output_tokens": sent["output_tokens"],
        "cached_tokens": sent["cached_tokens"],
        "turns": 2,
        "tool_calls": 1,
        "resumes": 0,
    }
    assert result.json("usage.json")["cost_usd"] > 0  # Claude's total_cost_usd
    assert_key_only_in_auth_header(result, key)
    assert_no_other_host(result)
    # (tmp_path / "claude_trace.txt").write_text(raw)  # fixture source
    print(json.dumps({"seconds": round(result.seconds, 1), "requests": len(result.server.recorded())}))
    assert processes_under(result.job_root) == []
