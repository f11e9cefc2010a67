"""Where the solve stage's gateway listens and how the agent reaches it, per runtime
(stages/llm_gateway.py); the real thing runs in tests/agents (bwrap and none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptb_harness.gateway.config import GatewayConfig
from ptb_harness.gateway.process import GatewayProcess
from ptb_harness.runtime.procs import ProcessResult
from ptb_harness.runtime.sandbox import Endpoint
from ptb_harness.stages.llm_gateway import SANDBOX_PORT, agent_endpoints, agent_env, listens_on_socket
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
