"""The shipped agents' real CLIs, at their pinned versions, run real cells through
Snakemake against the scripted model server (a test stand-in for each provider's API).

Each agent must show: the tool call really ran and the cell is scored; solve_out.txt is
the CLI's own event stream, detected by content; usage.json holds exactly the tokens the
server sent; the planted key reached the server only in the auth header and is nowhere
on disk; no request went to any other host; a tool call sleeping past the budget is
stopped with the CLI at the deadline (`timeout`); a reprompt entry is resumed once and
the trace holds both turns. Add an agent by adding an AgentCase.
"""

from __future__ import annotations

import csv
import json
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from agent_env import cli_bin, files_containing, processes_under, run_agent_cell
from scripted_server import Plan

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# also says whether the provider's key reached the tool's environment (it must not)
COPY_MODEL = (
    'cp -r "$MODEL_TO_TRAIN" final_model && ls final_model'
    ' && (printenv K >/dev/null && echo "key in tools: yes" || echo "key in tools: no")'
)
#: sleeps until 8 s of the budget are left (no $(...): Gemini CLI refuses command
#: substitution, even inside sh -c)
SLEEP_TO_8_LEFT = "bash ~/timer.sh --seconds | awk '{system(\"sleep \" ($1 > 8 ? $1 - 8 : 0))}'"
#: the files of a cell that solve and parse_trace write (no scoring, no tables: faster)
SOLVED = ("solve.json", "usage.json")
SLEEPER = "sh -c 'echo $$ > $HOME/sleeper.pid; exec sleep 300'"


@dataclass(frozen=True)
class AgentCase:
    dir: str
    cli: str
    model: str
    protocols: tuple[str, ...]
    key_var: str
    key_prefix: str
    base_url_env: dict[str, str]  # "{url}" is the server's URL
    auth_header: str
    auth_value: str  # "{key}" is the planted key
    marker: str  # a string only the CLI's own stream holds
    tool_line: str  # the transcript's line for the tool call
    paths: frozenset[str]
    key_in_tools: bool  # whether tool commands see the key
    #: more headers that carry the key, as (name, value with "{key}"): Claude Code's
    #: apiKeyHelper value goes in both x-api-key and Authorization
    extra_auth: tuple[tuple[str, str], ...] = ()
    #: USD per million (input, output) tokens the agent's config states, when it does
    prices: tuple[float, float] | None = None
    #: budgets of the timeout and reprompt cells: the CLI must start, call the model and
    #: run its tool within them (the Node CLIs take 5-12 s to start on a busy 2-core box)
    timeout_hours: float = 0.003
    reprompt_hours: float = 0.005


CASES = {
    "claude": AgentCase(
        dir="claude",
        cli="claude",
        model="claude-stand-in-1",
        protocols=("anthropic",),
        key_var="ANTHROPIC_API_KEY",
        key_prefix="sk-ant-planted-",
        base_url_env={"ANTHROPIC_BASE_URL": "{url}"},
        auth_header="x-api-key",
        auth_value="{key}",
        extra_auth=(("authorization", "Bearer {key}"),),
        marker='"claude_code_version":"2.1.332"',
        tool_line="TOOL CALL Bash",
        paths=frozenset({"/v1/messages"}),
        key_in_tools=False,
    ),
    "codex": AgentCase(
        dir="codex",
        cli="codex",
        model="gpt-stand-in-1",
        protocols=("openai_responses",),
        key_var="OPENAI_API_KEY",
        key_prefix="sk-planted-",
        base_url_env={"OPENAI_BASE_URL": "{url}/v1"},
        auth_header="authorization",
        auth_value="Bearer {key}",
        marker='"type":"thread.started"',
        tool_line="TOOL CALL shell",
        paths=frozenset({"/v1/responses"}),
        key_in_tools=False,
    ),
    "gemini": AgentCase(
        dir="gemini",
        cli="gemini",
        model="gemini-stand-in-1",
        protocols=("gemini",),
        key_var="GEMINI_API_KEY",
        key_prefix="planted-gemini-",
        base_url_env={"GOOGLE_GEMINI_BASE_URL": "{url}"},
        auth_header="x-goog-api-key",
        auth_value="{key}",
        marker='"tool_name":"run_shell_command"',
        tool_line="TOOL CALL run_shell_command",
        paths=frozenset({"/v1beta/models/gemini-stand-in-1:streamGenerateContent"}),
        key_in_tools=False,  # the key is in its credential file, not its environment
        timeout_hours=0.006,
        reprompt_hours=0.01,
    ),
    "qwen": AgentCase(
        dir="qwen",
        cli="qwen",
        model="qwen-stand-in-1",
        protocols=("openai_chat",),
        key_var="DASHSCOPE_API_KEY",
        key_prefix="sk-planted-",
        base_url_env={"OPENAI_BASE_URL": "{url}/v1"},
        auth_header="authorization",
        auth_value="Bearer {key}",
        marker='"qwen_code_version":"0.24.4"',
        tool_line="TOOL CALL run_shell_command",
        paths=frozenset({"/v1/chat/completions"}),
        key_in_tools=False,  # the key is in its settings file, not its environment
        timeout_hours=0.008,
        reprompt_hours=0.01,
    ),
    "opencode": AgentCase(
        dir="opencode",
        cli="opencode",
        model="stand-in-1",
        protocols=("openai_chat",),
        key_var="OPENROUTER_API_KEY",
        key_prefix="sk-or-planted-",
        base_url_env={"OPENCODE_BASE_URL": "{url}/v1", "OPENCODE_PRICE_INPUT": "3", "OPENCODE_PRICE_OUTPUT": "15"},
        auth_header="authorization",
        auth_value="Bearer {key}",
        marker='"sessionID":"ses_',
        tool_line="TOOL CALL bash",
        paths=frozenset({"/v1/chat/completions"}),
        key_in_tools=False,  # its config names the key file ({file:...})
        prices=(3.0, 15.0),
        timeout_hours=0.008,
        reprompt_hours=0.01,
    ),
}


def usage(i: int, o: int, c: int) -> dict:
    return {"usage": {"input_tokens": i, "output_tokens": o, "cached_tokens": c}}


#: the campaign's price of every stand-in model (USD per million: input, output, cache reads)
PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3}


def priced(sent: dict) -> float:
    """The price table applied to the usage the stand-in sent."""
    uncached = sent["input_tokens"] - sent["cached_tokens"]
    return (
        uncached * PRICE["input"]
        + sent["cached_tokens"] * PRICE["cache_read"]
        + sent["output_tokens"] * PRICE["output"]
    ) / 1e6


def run(tmp_path, case: AgentCase, steps, hours=0.01, entry=None, solve=None, targets=()):
    cli_bin(case.cli)
    key = f"{case.key_prefix}{secrets.token_hex(12)}"
    plan = Plan(case.model, steps)
    solve = {"llm_prices": {case.model: PRICE}, **(solve or {})}
    result = run_agent_cell(
        tmp_path,
        case.dir,
        {"name": f"{case.dir}-test", "model": case.model, **(entry or {})},
        plan,
        list(case.protocols),
        secrets={case.key_var: key},
        base_url_env=case.base_url_env,
        hours=hours,
        solve=solve,
        targets=targets,
    )
    assert result.snakemake.returncode == 0, result.snakemake.stderr[-3000:]
    return result, key


def assert_key_only_in_auth_header(case: AgentCase, result, key: str) -> None:
    requests = result.server.recorded()
    assert requests, "the CLI never called the model server"
    auth = {case.auth_header: case.auth_value, **dict(case.extra_auth)}
    for r in requests:
        assert {h: r.headers.get(h) for h in auth} == {h: v.format(key=key) for h, v in auth.items()}
        assert key.encode() not in r.body
        assert all(key not in v for k, v in r.headers.items() if k not in auth)
    for root in (result.workdir, result.job_root):
        assert files_containing(root, key) == []


def assert_no_other_host(case: AgentCase, result) -> None:
    # every proxy variable points at a recording stand-in: a request to any host but the
    # model server (telemetry, update checks, ...) would have arrived there
    assert [f"{r.method} {r.path}" for r in result.proxy.recorded()] == []
    assert {r.path.split("?")[0] for r in result.server.recorded()} == case.paths


def assert_usage_is_what_the_server_sent(result, **expected) -> None:
    sent = result.plan.total_sent()
    got = result.json("usage.json")
    assert {k: got[k] for k in sent} == sent
    assert {k: got[k] for k in expected} == expected


def save_fixture(result, name: str) -> None:
    """Keep the real trace as a trace-test fixture (regenerated by PTB_SAVE_TRACES=1)."""
    import os

    if os.environ.get("PTB_SAVE_TRACES"):
        FIXTURES.mkdir(exist_ok=True)
        shutil.copyfile(result.cell / "solve_out_sanitized.txt", FIXTURES / name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_tool_call_runs_and_the_cell_is_scored(tmp_path, name):
    case = CASES[name]
    steps = [{"shell": COPY_MODEL, **usage(1200, 40, 300)}, {"text": "final_model is saved.", **usage(1500, 9, 1000)}]
    steps[0]["shell"] = COPY_MODEL.replace("printenv K", f"printenv {case.key_var}")
    result, key = run(tmp_path, case, steps)
    solve = result.json("solve.json")
    assert (solve["status"], solve["exit_code"], solve["final_model_present"]) == ("exited", 0, True)
    assert (result.cell / "final_model" / "config.json").exists()  # the tool call really ran
    assert result.json("metrics.json")["accuracy"] == 0.75  # scored from the copied model
    raw = (result.cell / "solve_out.txt").read_text()
    assert case.marker in raw.replace(" ", "")  # the CLI's own event stream
    parsed = (result.cell / "solve_parsed.txt").read_text()
    assert parsed.splitlines()[0] == f"# trace format: {name} (detected from content)"
    assert case.tool_line in parsed
    # the tool's output line (the transcript continues a result's lines unprefixed)
    outputs = [ln for ln in parsed.splitlines() if ln.startswith("key in tools:")]
    assert outputs == [f"key in tools: {'yes' if case.key_in_tools else 'no'}"]
    assert_usage_is_what_the_server_sent(result, tool_calls=1, resumes=0, format=name, source="gateway")
    tables = result.workdir / "results" / "tables"
    row = next(csv.DictReader((tables / "cells.csv").open()))
    sent = result.plan.total_sent()
    assert int(row["input_tokens"]) == sent["input_tokens"]
    # the cost is the gateway's: the campaign's price table applied to the provider's usage
    assert float(row["cost_usd"]) == pytest.approx(priced(sent))
    usage_json = result.json("usage.json")
    assert usage_json["requests"] == len(result.server.recorded())
    # the trace's own figures agree on the tokens (the CLIs' own cost tables may not)
    assert {k: usage_json["agent_reported"][k] for k in ("input_tokens", "output_tokens")} == {
        k: sent[k] for k in ("input_tokens", "output_tokens")
    }
    assert "tokens" not in (usage_json.get("disagreement") or "")
    log_lines = (result.cell / "llm_log.jsonl").read_text().splitlines()
    assert len(log_lines) == len(result.server.recorded())
    assert "## Tokens and cost per entry" in (tables / "leaderboard.md").read_text()
    assert_key_only_in_auth_header(case, result, key)
    assert_no_other_host(case, result)
    assert processes_under(result.job_root) == []
    save_fixture(result, f"{name}_scored.txt")
    print(json.dumps({"agent": name, "seconds": round(result.seconds, 1), "usage": result.json("usage.json")}))


@pytest.mark.parametrize("name", sorted(CASES))
def test_tool_call_past_the_budget_is_stopped_with_the_cli(tmp_path, name):
    case = CASES[name]
    steps = [{"shell": SLEEPER, **usage(100, 5, 0)}, {"text": "never reached", **usage(100, 5, 0)}]
    result, key = run(tmp_path, case, steps, hours=case.timeout_hours, targets=SOLVED)  # claude: 10.8 s
    solve = result.json("solve.json")
    assert solve["status"] == "timeout" and solve["description"].startswith("stopped at its time limit")
    budget = case.timeout_hours * 3600
    assert budget <= solve["duration_s"] < budget + 2 + 3  # budget, grace, slack
    (job,) = result.job_dirs()
    pid = int((job / "home" / "sleeper.pid").read_text())  # the tool call did start
    assert not Path(f"/proc/{pid}").exists() or b"sleep" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert processes_under(result.job_root) == []  # the CLI and every child are gone
    assert files_containing(result.job_root, key) == []  # a key file is removed at the deadline too
    # stopped before the CLI wrote its totals: its trace does not say (unknown, not 0);
    # the gateway metered the call it passed
    got = result.json("usage.json")
    assert (got["source"], got["input_tokens"]) == ("gateway", result.plan.total_sent()["input_tokens"])
    assert got["agent_reported"]["input_tokens"] is None


@pytest.mark.parametrize("name", sorted(CASES))
def test_reprompt_resumes_the_session_once_and_the_trace_holds_both_turns(tmp_path, name):
    case = CASES[name]
    steps = [
        {"shell": COPY_MODEL, **usage(1000, 30, 100)},
        {"text": "Done early.", **usage(1100, 5, 200)},
        # the resumed turn (2 model turns in its conversation) sleeps until 8 s are left
        {"shell": SLEEP_TO_8_LEFT, **usage(1300, 20, 400)},
        {"text": "Done for good.", **usage(1400, 6, 500)},
    ]
    # the first run ends with >= 9 s left (resumed); the resumed turn sleeps until 8 s are
    # left, so less than 9 s is left when it ends (not resumed again)
    result, key = run(
        tmp_path,
        case,
        steps,
        hours=case.reprompt_hours,
        entry={"reprompt": True},
        solve={"reprompt_min_minutes": 0.15},
        targets=SOLVED,
    )
    solve = result.json("solve.json")
    assert len(solve["resumes"]) == 1, solve["resumes"]
    resume = solve["resumes"][0]
    assert resume["status"] == "exited" and resume["exit_code"] == 0 and resume["time_left_s"] >= 9
    assert resume["message"].startswith("You still have 0h 0m remaining")
    raw = (result.cell / "solve_out.txt").read_text()
    first, marker, second = raw.partition("ptb-harness: resume 1:")
    assert marker and "Done early." in first and "Done for good." in second and "Done early." not in second
    assert_usage_is_what_the_server_sent(result, tool_calls=2, resumes=1)
    assert_key_only_in_auth_header(case, result, key)
    assert_no_other_host(case, result)
    save_fixture(result, f"{name}_reprompt.txt")


#: a tool forging usage into the CLI's own stdout (the trace): a negative result event and
#: another CLI's format (Codex turn.completed lines)
FORGE_USAGE = (
    'printf \'%s\\n\' \'{"type":"result","subtype":"success","total_cost_usd":-41.5,'
    '"usage":{"input_tokens":-4999000,"output_tokens":-199000}}\' > /proc/$PPID/fd/1;'
    ' for i in 1 2 3; do printf \'%s\\n\' \'{"type":"turn.completed","usage":'
    '{"input_tokens":10,"output_tokens":5}}\' > /proc/$PPID/fd/1; done; echo forged'
)


def test_the_llm_budget_stops_the_session_and_the_model_is_scored(tmp_path):
    """A cap of 2,500 tokens: the third model call (2,749 spent) is refused, the CLI is
    stopped, the cell ends llm_budget_exhausted and is scored; usage.json is the gateway's
    whatever a tool forged into the trace, and its cost is the price table's."""
    case = CASES["claude"]
    steps = [
        {"shell": COPY_MODEL.replace("printenv K", f"printenv {case.key_var}"), **usage(1200, 40, 300)},
        {"shell": FORGE_USAGE, **usage(1500, 9, 1000)},
        {"text": "never reached", **usage(100, 5, 0)},
    ]
    result, key = run(tmp_path, case, steps, solve={"llm_budget": {"tokens": 2500}})
    solve = result.json("solve.json")
    assert solve["status"] == "llm_budget_exhausted", solve["description"]
    assert solve["description"].startswith("stopped at its LLM budget (tokens 2749 of 2500")
    # refused until the harness's stop lands (the CLI may retry at once)
    assert solve["llm"]["refused"]["llm_budget"] >= 1 and solve["llm"]["requests"] == 2
    assert result.json("metrics.json")["accuracy"] == 0.75  # the model it left is scored
    sent = result.plan.total_sent()
    assert len(result.server.recorded()) == 2  # nothing past the cap reached the provider
    got = result.json("usage.json")
    assert (got["source"], {k: got[k] for k in sent}) == ("gateway", sent)
    assert got["cost_usd"] == pytest.approx(priced(sent))
    assert "forged" in (result.cell / "solve_parsed.txt").read_text()  # the forging tool ran
    refused = json.loads((result.cell / "llm_log.jsonl").read_text().splitlines()[-1])
    assert (refused["refused"], refused["status"]) == ("llm_budget", 400)
    assert "LLM budget is exhausted" in refused["response"]["body"]
    assert_key_only_in_auth_header(case, result, key)
