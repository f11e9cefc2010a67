"""Where the solve stage's gateway listens and how the agent reaches it, per runtime
(stages/llm_gateway.py); the real thing runs in tests/agents (bwrap and none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptb_harness.gateway.config import GatewayConfig
from ptb_harness.gateway.meter import Meter
from ptb_harness.gateway.process import GatewayProcess
from ptb_harness.runtime.procs import ProcessResult
from ptb_harness.runtime.sandbox import Endpoint
from ptb_harness.stages.llm_gateway import (
    SANDBOX_PORT,
    agent_endpoints,
    agent_env,
    listens_on_socket,
    provider_failure,
    rotate_request_log,
)
from ptb_harness.stages.solve_record import end_of


@pytest.mark.parametrize(("runtime", "socket"), [("bwrap", True), ("none", False), ("apptainer", False)])
def test_only_bwrap_gets_a_unix_socket_the_others_share_the_hosts_network(runtime, socket):
    assert listens_on_socket(runtime) is socket


def gateway(socket_path: Path | None, port: int | None) -> GatewayProcess:
    config = GatewayConfig("http://up", "sk-real", "ptbgw-t", "anthropic", Path("/x/llm_log.jsonl"), socket_path)
    gw = GatewayProcess(config, {}, Path("/x/gateway.log"))
    gw.ready = {"socket": str(socket_path)} if socket_path else {"port": port}
    return gw


def test_a_socket_gateway_is_an_endpoint_on_the_sandboxs_own_port_a_tcp_one_its_host_port():
    sock = gateway(Path("/scratch/ptb-x/harness/llm-gateway.sock"), None)
    assert agent_env(sock) == {"PTB_LLM_BASE_URL": f"http://127.0.0.1:{SANDBOX_PORT}", "PTB_LLM_TOKEN": "ptbgw-t"}
    assert agent_endpoints(sock) == [Endpoint(Path("/scratch/ptb-x/harness/llm-gateway.sock"), SANDBOX_PORT)]
    tcp = gateway(None, 41234)
    assert agent_env(tcp) == {"PTB_LLM_BASE_URL": "http://127.0.0.1:41234", "PTB_LLM_TOKEN": "ptbgw-t"}
    assert agent_endpoints(tcp) == [] and agent_endpoints(None) == [] and agent_env(None) == {}


REFUSED = {"exhausted": "tokens 2749 of 2500", "refused": {"llm_budget": 1}}
AT = "stopped at its LLM budget (tokens 2749 of 2500; "
SPENT = "llm_budget_exhausted"


@pytest.mark.parametrize(
    ("status", "code", "sig", "llm", "expected"),
    [
        # the gateway refused at the budget: however the CLI ended next, the session did so
        ("stopped", None, 15, REFUSED, (SPENT, AT + "SIGTERM)")),
        ("exited", 1, None, REFUSED,
         (SPENT, AT + "after the refusal, the CLI exited with code 1)")),
        ("exited", 0, None, REFUSED,
         (SPENT, AT + "after the refusal, the CLI exited with code 0)")),
        ("signal", None, 6, REFUSED,
         (SPENT, AT + "after the refusal, the CLI was killed by signal 6 (SIGABRT))")),
        # the time limit came first: a timeout
        ("timeout", None, 15, REFUSED, ("timeout", "stopped at its time limit (SIGTERM)")),
        # the limit reached by the last answer, but no call refused: the CLI ended by itself
        ("exited", 0, None, {"exhausted": "tokens 2749 of 2500", "refused": {}}, ("exited", "exited with code 0")),
        # refused for another reason (a wrong token, a model without a price): not the budget
        ("exited", 1, None, {"refused": {"token": 2, "unpriced": 1}}, ("exited", "exited with code 1")),
        ("exited", 1, None, None, ("exited", "exited with code 1")),
    ],
)  # fmt: skip
def test_a_session_the_gateway_refused_at_its_budget_ends_llm_budget_exhausted(status, code, sig, llm, expected):
    """From the gateway's own record (refused.llm_budget), not from how the CLI exited: Codex
    exits 1 on the refusal, often before the harness's stop lands."""
    assert end_of(ProcessResult(status, code, sig, 0.0, 1.0), llm) == expected


def test_an_earlier_attempts_request_log_moves_aside_and_none_is_overwritten(tmp_path):
    """Its attempt is read from its first line's start (a line holds a request body: Codex's
    first is 40 KB), a log that does not say it is kept under another name."""
    log = tmp_path / "llm_log.jsonl"
    log.write_text('{"n":1,"attempt":3,"request":{"body":"' + "x" * 100_000 + '"}}\n')
    rotate_request_log(tmp_path)
    for _ in range(2):
        log.write_text("not a log line\n")
        rotate_request_log(tmp_path)
    rotate_request_log(tmp_path)  # none there: nothing to do
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["llm_log.attempt-3.jsonl", "llm_log.attempt-earlier.2.jsonl", "llm_log.attempt-earlier.jsonl"]
    assert len((tmp_path / "llm_log.attempt-3.jsonl").read_text()) > 100_000


def summary(*statuses: int) -> dict:
    """A gateway summary after answers with these statuses (the meter's own counting)."""
    meter = Meter()
    for status in statuses:
        meter.add(status, 1.0, None, None)
    return meter.summary()


@pytest.mark.parametrize(
    ("statuses", "how", "infra"),
    [
        ((200, 503, 503, 503), ("exited", 1, None), True),  # past the CLI's retries
        ((200, 503, 503, 503), ("exited", 0, None), True),
        ((200, 0, 502, 429), ("exited", 1, None), True),  # unreachable, a bad gateway, a quota
        ((200, 401), ("exited", 1, None), True),  # the site's key refused
        ((200, 503), ("exited", 1, None), True),  # one failure, then the CLI gave up
        ((200, 503), ("exited", 0, None), False),  # one failure, then the CLI ended well
        ((503, 503, 503, 200), ("exited", 1, None), False),  # it recovered: the exit is the agent's
        ((200, 400, 404), ("exited", 1, None), False),  # the agent's own bad requests
        ((200, 503, 503, 503), ("timeout", None, 15), False),  # the time limit ended it
        ((200, 503, 503, 503), ("stopped", None, 15), False),  # stopped by the harness (LLM budget)
    ],
)
def test_which_session_ends_are_the_providers_failure(statuses, how, infra):
    """The solve stage's rule (README 'When the gateway fails'): infra_failed after a
    provider's failures at the end of a session the agent ended itself."""
    why = provider_failure(summary(*statuses), ProcessResult(*how, 0.0, 1.0))
    assert (why is not None) is infra, why
