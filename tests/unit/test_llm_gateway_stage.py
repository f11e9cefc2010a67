"""Where the solve stage's gateway listens and how the agent reaches it, per runtime
(stages/llm_gateway.py); the real thing runs in tests/agents (bwrap and none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptb_harness.gateway.config import GatewayConfig
from ptb_harness.gateway.process import GatewayProcess
from ptb_harness.runtime.sandbox import Endpoint
from ptb_harness.stages.llm_gateway import SANDBOX_PORT, agent_endpoints, agent_env, listens_on_socket


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
