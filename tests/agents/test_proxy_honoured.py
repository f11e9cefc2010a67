"""The no-other-host check of test_real_agents.py points every proxy variable at a
recording stand-in. That proves something only if the CLI sends its requests through
those variables: each CLI here, run by its solve.sh with the model's base URL on a host
that does not exist (as its gateway's: PTB_LLM_BASE_URL), must ask the stand-in proxy to
tunnel to that host (CONNECT)."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import time

import pytest
from agent_env import CLI_PREFIX, REPO, cli_bin
from scripted_server import Plan, ScriptedServer

from ptb_harness.runtime.agent_cli import bin_dir

pytestmark = pytest.mark.slow

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
#: agent dir -> (its CLI, the gateway's URL as solve.sh is given it, on a host that does not exist)
AGENTS = {
    "claude": ("claude", "https://model-claude.invalid"),
    "codex": ("codex", "https://model-codex.invalid/v1"),
    "gemini": ("gemini", "https://model-gemini.invalid"),
    "qwen": ("qwen", "https://model-qwen.invalid/v1"),
    "opencode": ("opencode", "https://model-opencode.invalid/v1"),
}


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_the_cli_sends_its_requests_through_the_proxy_variables(tmp_path, agent):
    cli, url = AGENTS[agent]
    cli_bin(cli)
    home = tmp_path / "home"
    (home / "task").mkdir(parents=True)
    shutil.copy(REPO / "agents" / agent / "solve.sh", home / "solve.sh")
    host = url.split("/")[2]
    with ScriptedServer(Plan("none", []), []) as proxy:
        env = {
            "PATH": f"{bin_dir(CLI_PREFIX)}:/usr/bin:/bin",
            "HOME": str(home),
            "PROMPT": "hello",
            "AGENT_MODEL": "stand-in-1",
            "PTB_LLM_TOKEN": f"ptbgw-{secrets.token_hex(8)}",
            "PTB_LLM_BASE_URL": url,
            **dict.fromkeys(PROXY_VARS, proxy.url),
            "NO_PROXY": "127.0.0.1,localhost",
        }
        proc = subprocess.Popen(
            ["bash", "../solve.sh"],
            cwd=home / "task",
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                if any(r.method == "CONNECT" for r in proxy.recorded()):
                    break
                time.sleep(0.2)
        finally:
            stop_group(proc)
        tunnels = {r.path for r in proxy.recorded() if r.method == "CONNECT"}
    assert f"{host}:443" in tunnels, f"{cli} never asked the proxy for {host}: {tunnels or 'no request'}"


def stop_group(proc: subprocess.Popen) -> None:
    """TERM the process group this test started (solve.sh and its CLI), then KILL what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
