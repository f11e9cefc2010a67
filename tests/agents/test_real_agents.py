"""The shipped agents' real CLIs, at their pinned versions, run real cells through
Snakemake against the scripted model server (a test stand-in for each provider's API),
each through its cell's LLM gateway.

Each agent must show, in its scored cell under runtime bwrap (the real sandbox: its own
network namespace, site.network none, the gateway behind a sandbox endpoint): the tool
call really ran and the cell is scored; solve_out.txt is the CLI's own event stream,
detected by content; usage.json holds exactly the tokens the server sent; the planted key
reached the server only in the auth header, and a hostile tool sweeping the sandbox's whole
view while the CLI runs (sandbox_sweep.py: every file, every process's environ and
cmdline) finds the cell's token but not the key, so the key's hex, reversed and base32
forms it writes into final_model cannot exist; a wrong token gets 401; another cell's
gateway socket and the host's loopback are out of reach. Under runtime none (the gateway on
a loopback TCP port): no request went to any other host; a tool call sleeping past the
budget is stopped with the CLI at the deadline (`timeout`); a reprompt entry is resumed
once and the trace holds both turns. Under bwrap again: a tool forging usage into the CLI's
stdout changes nothing of usage.json, and an LLM token cap stops the session
(`llm_budget_exhausted`). Add an agent by adding an AgentCase.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import json
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import sandbox_sweep
from agent_env import cli_bin, files_containing, gateway_failures, processes_under, run_agent_cell
from scripted_server import Plan

from ptb_harness.core.text import TRANSCRIPT_CONTINUATION
from ptb_harness.gateway.config import GatewayConfig
from ptb_harness.gateway.process import GatewayProcess
from ptb_harness.results.token_usage import format_usd
from ptb_harness.stages.llm_gateway import SANDBOX_PORT, SOCKET_NAME

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
#: the hostile tool of the scored cells (copied into the task dir, the CLI's working dir)
SWEEP = Path(__file__).resolve().parent / "sandbox_sweep.py"


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
    token_file: str  # where solve.sh puts the cell's token for the CLI (relative to HOME)
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
        token_file=".claude/.api-key",
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
        token_file=".codex/config.toml",
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
        token_file=".gemini/gemini-credentials.json",
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
        token_file=".qwen/settings.json",
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
        token_file=".config/opencode/provider.key",
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


def run(tmp_path, case: AgentCase, steps, hours=0.01, entry=None, solve=None, targets=(), runtime="none"):
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
        runtime=runtime,
        task_files=(SWEEP,),
    )
    assert result.snakemake.returncode == 0, result.snakemake.stderr[-3000:] + gateway_failures(result.workdir)
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
    """Keep the real trace as a trace-test fixture (regenerated by PTB_SAVE_TRACES=1), with
    <repo> for this checkout's path (in a Node CLI's stack trace)."""
    if os.environ.get("PTB_SAVE_TRACES"):
        FIXTURES.mkdir(exist_ok=True)
        trace = (result.cell / "solve_out_sanitized.txt").read_bytes()
        (FIXTURES / name).write_bytes(trace.replace(str(FIXTURES.parents[2]).encode(), b"<repo>"))


def encodings(value: str) -> dict[str, bytes]:
    """The forms the exfiltrating tool writes a value in (sandbox_sweep.py), and the value."""
    raw = value.encode()
    return {"raw": raw, "hex": raw.hex().encode(), "reversed": raw[::-1], "base32": base64.b32encode(raw)}


@pytest.fixture
def other_cell(tmp_path):
    """Another cell's gateway as the harness starts it under bwrap (the real process, on a
    Unix socket in that cell's job dir under the same scratch), and a service on the host's
    loopback: what a cell's sandbox must not reach."""
    harness_dir = tmp_path / "scratch" / "other-cell" / "harness"
    harness_dir.mkdir(parents=True)
    config = GatewayConfig(
        upstream="http://127.0.0.1:9",
        key=f"sk-other-{secrets.token_hex(12)}",
        token=f"ptbgw-{secrets.token_hex(24)}",
        protocol="anthropic",
        log_path=harness_dir / "llm_log.jsonl",
        socket_path=harness_dir / SOCKET_NAME,
    )
    with GatewayProcess(config, os.environ, harness_dir / "gateway.log") as gateway, socket.socket() as host:
        host.bind(("127.0.0.1", 0))
        host.listen()
        # it is there and listening, for the host (the probe's own code, run outside)
        assert sandbox_sweep.connect(socket.AF_UNIX, str(config.socket_path)) == "connected"
        yield gateway, host.getsockname()[1]


def sweep_command(other_socket: Path, host_port: int) -> str:
    args = f"{SANDBOX_PORT} {shlex.quote(str(other_socket))} {host_port}"
    return f'python sandbox_sweep.py "$HOME/sweep" {args}'


def assert_the_sandbox_held_no_key(case: AgentCase, result, key: str) -> str:
    """The sweep (run by the CLI's tool while the CLI ran) read the CLI's processes and its
    token file and found the token, never the key; the key's encodings are nowhere; the
    exfiltration ran and delivered what it found. Returns the token."""
    (job,) = result.job_dirs()
    sweep = job / "home" / "sweep"
    dump = (sweep / "dump.bin").read_bytes()
    inventory = json.loads((sweep / "inventory.json").read_text())
    assert f"/home/ben/{case.token_file}" in inventory["files"]  # where the CLI holds its credential
    assert any(case.cli in p.get("argv", "") for p in inventory["procs"]), inventory["procs"]
    assert all(isinstance(p["environ"], int) for p in inventory["procs"])  # every environ was read
    # the gateway is outside the sandbox's PID namespace, and the provider's URL (the
    # entry's base-URL variable) is its upstream only: neither is in the sandbox's view
    assert not any("ptb_harness.gateway" in p.get("argv", "") for p in inventory["procs"])
    assert result.server.url.encode() not in dump
    tokens = set(re.findall(rb"PTB_LLM_TOKEN=(ptbgw-[0-9a-f]{48})", dump))
    assert len(tokens) == 1, tokens  # the CLI's own credential was in its view
    token = tokens.pop().decode()
    for form, needle in encodings(key).items():
        assert needle not in dump, form
        for root in (result.workdir, result.job_root):
            assert files_containing(root, needle.decode()) == [], form
    # the attack itself ran and was delivered: what it could reach, the token, is in the model
    exfil = (result.cell / "final_model" / "exfil.txt").read_text()
    assert all(encodings(token)[form].decode() in exfil for form in ("hex", "reversed", "base32"))
    return token


def assert_out_of_reach(result, other_socket: Path) -> None:
    """The probes of the sweep: a wrong token got 401, another cell's gateway socket is not
    in the sandbox's view, the host's loopback is not its own, /run/ptb holds its endpoint."""
    (job,) = result.job_dirs()
    probes = json.loads((job / "home" / "sweep" / "probes.json").read_text())
    assert probes["wrong_token"]["status"] == 401, probes
    assert "wrong or missing token" in probes["wrong_token"]["body"]
    assert (probes["other_cell_socket"], probes["host_loopback"]) == ("FileNotFoundError", "ConnectionRefusedError")
    assert probes["run_ptb"] == [f"endpoint-{SANDBOX_PORT}.sock", "forward.py"]
    assert other_socket.is_socket()  # while it stood there, listening, on the host


@pytest.mark.parametrize("name", sorted(CASES))
def test_tool_call_runs_and_the_cell_is_scored(tmp_path, name, other_cell):
    """Under bwrap: scored; the key only in the auth header upstream, nowhere in the
    sandbox's view (swept while the CLI ran), so never encoded into final_model; a wrong
    token refused; another cell's gateway and the host's loopback out of reach."""
    case = CASES[name]
    other_gateway, host_port = other_cell
    copy = COPY_MODEL.replace("printenv K", f"printenv {case.key_var}")
    tool = f"{copy} && {sweep_command(other_gateway.config.socket_path, host_port)}"
    steps = [{"shell": tool, **usage(1200, 40, 300)}, {"text": "final_model is saved.", **usage(1500, 9, 1000)}]
    result, key = run(tmp_path, case, steps, runtime="bwrap")
    solve = result.json("solve.json")
    assert (solve["status"], solve["exit_code"], solve["final_model_present"]) == ("exited", 0, True)
    assert solve["harness"]["runtime"] == "bwrap"
    assert (result.cell / "final_model" / "config.json").exists()  # the tool call really ran
    assert result.json("metrics.json")["accuracy"] == 0.75  # scored from the copied model
    raw = (result.cell / "solve_out.txt").read_text()
    assert case.marker in raw.replace(" ", "")  # the CLI's own event stream
    parsed = (result.cell / "solve_parsed.txt").read_text()
    assert parsed.splitlines()[0] == f"# trace format: {name} (declared by the agent)"
    assert case.tool_line in parsed
    # the tool's output line (a result's lines after its first are continuation lines)
    outputs = [ln for ln in parsed.splitlines() if ln.startswith(f"{TRANSCRIPT_CONTINUATION}key in tools:")]
    assert outputs == [f"{TRANSCRIPT_CONTINUATION}key in tools: {'yes' if case.key_in_tools else 'no'}"]
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
    log = [json.loads(line) for line in (result.cell / "llm_log.jsonl").read_text().splitlines()]
    assert len([e for e in log if e["refused"] is None]) == len(result.server.recorded())
    assert [(e["refused"], e["status"]) for e in log if e["refused"]] == [("token", 401)]  # the probe's
    assert solve["llm"]["refused"] == {"token": 1}
    board = (tables / "leaderboard.md").read_text()
    assert "## Tokens and cost per entry" in board
    # the leaderboard's cost column is the gateway's
    (entry_row,) = [ln for ln in board.splitlines() if ln.split(" | ")[1:2] == [f"{case.dir}-test"]]
    assert entry_row.endswith(f"| {format_usd(priced(sent))} |"), entry_row
    # the viewer shows the gateway's log beside the transcript
    (page,) = (result.workdir / "results" / "viewer" / "cells").glob(f"{case.dir}-test.*.html")
    assert f"llm_log.jsonl: {len(log)} calls;" in page.read_text() and "id='transcript'" in page.read_text()
    assert_key_only_in_auth_header(case, result, key)
    token = assert_the_sandbox_held_no_key(case, result, key)
    assert all(token not in r.headers.get(case.auth_header, "") for r in result.server.recorded())
    assert_out_of_reach(result, other_gateway.config.socket_path)
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


#: forged usage events in every shipped CLI's trace format (Claude Code's result, Qwen
#: Code's result with total_tokens, Codex's turn.completed, Gemini CLI's result stats,
#: OpenCode's step_finish), each claiming 5,000,000 / 200,000 tokens, and a negative one
FORGED = (
    '{"type":"result","subtype":"success","total_cost_usd":42.5,"usage":{"input_tokens":5000000,"output_tokens":200000}}',
    '{"type":"result","subtype":"success","total_cost_usd":-41.5,"usage":{"input_tokens":-4999000,"output_tokens":-199000}}',
    '{"type":"result","subtype":"success","usage":{"input_tokens":5000000,"output_tokens":200000,"total_tokens":5200000}}',
    '{"type":"turn.completed","usage":{"input_tokens":5000000,"cached_input_tokens":0,"output_tokens":200000}}',
    '{"type":"result","timestamp":"2026-01-01T00:00:00.000Z","status":"success",'
    '"stats":{"input_tokens":5000000,"output_tokens":200000,"cached":0}}',
    '{"type":"step_finish","part":{"reason":"stop","cost":42.5,"tokens":{"input":5000000,"output":200000}}}',
)
#: a tool writing them into the CLI's own stdout (the trace)
FORGE_USAGE = f"printf '%s\\n' {' '.join(repr(line) for line in FORGED)} > /proc/$PPID/fd/1; echo forged"


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_llm_budget_stops_the_session_and_forged_usage_changes_nothing(tmp_path, name):
    """Under bwrap, a cap of 2,500 tokens: the third model call (2,749 spent) is refused,
    the CLI is stopped, the cell ends llm_budget_exhausted (Claude Code's is scored: the
    others stop at usage.json); usage.json is the gateway's whatever a tool forged into
    the trace, the forgery is recorded as a disagreement, and the cost is the price
    table's applied to what the server sent."""
    case = CASES[name]
    steps = [
        {"shell": COPY_MODEL.replace("printenv K", f"printenv {case.key_var}"), **usage(1200, 40, 300)},
        {"shell": FORGE_USAGE, **usage(1500, 9, 1000)},
        {"text": "never reached", **usage(100, 5, 0)},
    ]
    scored = name == "claude"
    budget = {"llm_budget": {"tokens": 2500}}
    result, key = run(tmp_path, case, steps, solve=budget, targets=() if scored else SOLVED, runtime="bwrap")
    solve = result.json("solve.json")
    assert solve["status"] == "llm_budget_exhausted", solve["description"]
    assert solve["description"].startswith("stopped at its LLM budget (tokens 2749 of 2500")
    # refused until the harness's stop lands (the CLI may retry at once)
    assert solve["llm"]["refused"]["llm_budget"] >= 1
    sent = result.plan.total_sent()
    if scored:
        assert result.json("metrics.json")["accuracy"] == 0.75  # the model it left is scored
        # the cost shown (cells.csv, the leaderboard) is the price table on the server's usage
        tables = result.workdir / "results" / "tables"
        row = next(csv.DictReader((tables / "cells.csv").open()))
        assert (row["outcome"], float(row["cost_usd"])) == ("scored", pytest.approx(priced(sent)))
        assert "input_tokens: gateway 2700, agent reported" in row["usage_disagreement"]  # the forgery, as evidence
        board = (tables / "leaderboard.md").read_text()
        (entry_row,) = [ln for ln in board.splitlines() if ln.split(" | ")[1:2] == [f"{case.dir}-test"]]
        assert entry_row.endswith(f"| {format_usd(priced(sent))} |"), entry_row
    # two answers of the plan; nothing past the cap reached the provider (every request
    # that did was metered, side calls included)
    assert len(result.plan.sent_usage) == 2
    assert len(result.server.recorded()) == solve["llm"]["requests"]
    got = result.json("usage.json")
    assert (got["source"], {k: got[k] for k in sent}) == ("gateway", sent)
    assert got["cost_usd"] == pytest.approx(priced(sent))
    assert "forged" in (result.cell / "solve_parsed.txt").read_text()  # the forging tool ran
    # the trace is read as the CLI's (its agent.json declares it), whatever the tool wrote
    # into it and however many lines of stack trace Gemini CLI printed per refused call:
    # the forged event of its format is counted, and the disagreement recorded
    assert got["format"] == name
    assert got["agent_reported"]["input_tokens"] >= 5_000_000
    assert "input_tokens: gateway 2700, agent reported" in got["disagreement"], got
    parsed = (result.cell / "solve_parsed.txt").read_text()
    assert parsed.startswith(f"# trace format: {name} (declared by the agent)") and case.tool_line in parsed
    refused = json.loads((result.cell / "llm_log.jsonl").read_text().splitlines()[-1])
    assert (refused["refused"], refused["status"]) == ("llm_budget", 400 if name == "claude" else 429)
    assert "LLM budget is exhausted" in refused["response"]["body"]
    assert_key_only_in_auth_header(case, result, key)
    save_fixture(result, f"{name}_budget.txt")


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether pid is a descendant of ancestor (its parents read from /proc)."""
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if pid == ancestor:
            return True
    return False


def kill_the_gateway_after_its_first_call(cell: Path, attempt: int, done: threading.Event) -> list[int]:
    """In a thread: once the cell's gateway of this attempt has logged a model call,
    SIGKILL it (the pid the solve log names for this attempt, checked to be the gateway
    this test's Snakemake started)."""
    killed: list[int] = []
    log = cell / "logs" / "solve.log"
    gateway_pid = re.compile(rf"\(attempt {attempt}\)\n(?:.*\n)*?.*LLM gateway pid (\d+)")

    def called() -> bool:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return json.loads((cell / "llm_log.jsonl").read_text().splitlines()[0])["attempt"] == attempt
        return False

    def watch() -> None:
        while not done.is_set():
            found = gateway_pid.search(log.read_text()) if log.exists() else None
            if found and called():
                pid = int(found.group(1))
                assert b"ptb_harness.gateway" in Path(f"/proc/{pid}/cmdline").read_bytes()
                assert descends_from(pid, os.getpid())
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    return killed


def spend_shown(workdir: Path) -> dict:
    """What `ptb-harness status --json` says the campaign's one entry spent, and its text
    output's line for that entry."""
    cmd = [sys.executable, "-m", "ptb_harness", "status", "--spend", "--workdir", str(workdir)]
    env = {**os.environ, "CONDOR_CONFIG": os.devnull}
    shown = json.loads(subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env, check=True).stdout)
    spend = shown["llm_spend"]
    assert spend["entries"].keys() == {"codex-test"} and spend["unknown_cells"] == 0
    text = subprocess.run(cmd, capture_output=True, text=True, env=env).stdout
    assert f"  codex-test  {format_usd(spend['cost_usd'])} in 1 cell, {spend['requests']} requests" in text, text
    return {k: spend[k] for k in ("cells", "requests", "cost_usd")}


def test_a_gateway_that_dies_fails_the_solve_in_the_harness_and_a_rerun_is_the_next_attempt(tmp_path):
    """One Codex cell under bwrap, run twice. 1: the gateway is killed while the agent's
    tool runs: the agent is stopped at once and the solve fails in the harness
    (infra_failed), naming the gateway's death. 2: a rerun solves the cell as attempt 2,
    its record naming the first try and why it failed (the one-attempt rule: every try
    counted; the leaderboard lists the cell as solved more than once). A provider's 5xx
    takes the same path (llm_record): tests/gateway and the table of provider_failure; a
    real CLI is not run for it, for Codex 0.171.0 retries 30 times over 25 s first."""
    case = CASES["codex"]
    cli_bin(case.cli)
    key = f"{case.key_prefix}{secrets.token_hex(12)}"

    def attempt(steps):
        return run_agent_cell(
            tmp_path, case.dir, {"name": "codex-test", "model": case.model}, Plan(case.model, steps),
            list(case.protocols), secrets={case.key_var: key}, base_url_env=case.base_url_env,
            solve={"llm_prices": {case.model: PRICE}}, targets=SOLVED, runtime="bwrap",
        )  # fmt: skip

    cell = tmp_path / "campaign" / "results" / "cells" / "codex-test" / "fake" / "m1" / "0.01h-0gpu-run1"
    done = threading.Event()
    killed = kill_the_gateway_after_its_first_call(cell, 1, done)
    try:
        dying = attempt([{"shell": "sleep 20", **usage(100, 5, 0)}, {"text": "never reached", **usage(100, 5, 0)}])
    finally:
        done.set()
    assert killed and dying.snakemake.returncode != 0
    state = json.loads((cell / "solve.state.json").read_text())
    assert state["state"] == "failed"
    assert state["reason"].startswith("the LLM gateway exited with code -9 during the solve"), state
    assert dying.seconds < 20  # the agent stopped at once, not at its tool's end
    assert processes_under(dying.job_root) == [] and not (cell / "solve.json").exists()
    first = dying.plan.total_sent()
    assert spend_shown(dying.workdir) == {"cells": 1, "requests": 1, "cost_usd": pytest.approx(priced(first))}

    steps = [{"shell": COPY_MODEL.replace("printenv K", f"printenv {case.key_var}"), **usage(1200, 40, 300)}]
    solved = attempt([*steps, {"text": "final_model is saved.", **usage(1500, 9, 1000)}])
    assert solved.snakemake.returncode == 0, solved.snakemake.stderr[-3000:]
    solve = solved.json("solve.json")
    assert (solve["status"], solve["attempt"]) == ("exited", 2)
    (earlier,) = solve["earlier_attempts"]
    assert earlier["n"] == 1 and earlier["failure"].startswith("the LLM gateway exited with code -9"), earlier
    assert sorted(p.name for p in cell.glob("llm_log*.jsonl")) == ["llm_log.attempt-1.jsonl", "llm_log.jsonl"]
    # status: what the campaign spent so far, the failed attempt's calls included
    both = priced(first) + priced(solved.plan.total_sent())
    assert spend_shown(solved.workdir) == {"cells": 1, "requests": 3, "cost_usd": pytest.approx(both)}
    for root in (solved.workdir, solved.job_root):
        assert files_containing(root, key) == []
