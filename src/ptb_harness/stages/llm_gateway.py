"""The cell's LLM gateway in the solve stage: started before the agent, outside its
sandbox, stopped after its last turn; what it metered goes into solve.json's ``llm``.

Only agents whose agent.json has ``"llm"`` get one. Their API keys never reach the
sandbox: the harness reads the key from the launching environment (the first of the
agent's api_keys.json names that is set) and hands it to the gateway on a pipe; the
agent gets ``PTB_LLM_BASE_URL`` (the gateway) and ``PTB_LLM_TOKEN`` (a random token for
this attempt, the only credential the gateway accepts), and its solve.sh points its CLI
at them. The entry's base-URL variable (``llm.base_url_env``) is the gateway's upstream.

Where it listens: under bwrap only on a Unix socket in the job dir's harness-only part,
which the sandbox reaches as TCP ``127.0.0.1:SANDBOX_PORT`` of its own network namespace
(a sandbox ``Endpoint``: the socket bound in, a forwarder inside); nothing of the host's
loopback is opened to it, and no other cell's sandbox holds the socket. Under runtime
none and apptainer, which share the host's network, on a loopback TCP port of the host
(the endpoint hook would only put a forwarder on the same loopback; binding port 0 is
race-free): there the per-attempt token keeps other cells' agents out.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ptb_harness.campaign.agents import AgentSpec
from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import Cell
from ptb_harness.core import cell_files
from ptb_harness.core.errors import HarnessError
from ptb_harness.gateway.config import GatewayConfig
from ptb_harness.gateway.meter import Limits
from ptb_harness.gateway.process import GatewayError, GatewayProcess
from ptb_harness.runtime.procs import ProcessResult
from ptb_harness.runtime.sandbox import Endpoint
from ptb_harness.traces.redact import secrets_from_env

log = logging.getLogger("ptb_harness.stages.solve")

#: The agent's variables for its gateway.
BASE_URL_VAR, TOKEN_VAR = "PTB_LLM_BASE_URL", "PTB_LLM_TOKEN"
#: How many provider failures in a row, at the end of a session the agent ended itself,
#: make the solve an infrastructure failure (a CLI retries a few times, then gives up).
PROVIDER_FAILURE_STREAK = 3
#: The port a bwrap sandbox reaches its gateway on, in its own network namespace (a port
#: an agent's own servers rarely take: vLLM 8000, TensorBoard 6006, Jupyter 8888).
SANDBOX_PORT = 39217
#: The gateway's Unix socket, in the job dir's harness-only part (never bound in itself).
SOCKET_NAME = "llm-gateway.sock"


def listens_on_socket(runtime: str) -> bool:
    """Whether the cell's gateway listens on a Unix socket (bwrap: its own network
    namespace) rather than a loopback TCP port of the host (none, apptainer)."""
    return runtime == "bwrap"


def cell_limits(campaign: Campaign, cell: Cell) -> Limits:
    """solve.llm_budget, with the keys the entry's llm_budget names replaced."""
    base = campaign.settings.solve.llm_budget.record()
    entry = campaign.agent_entries.get(cell.agent)
    return Limits(**{**base, **dict(entry.llm_budget if entry else ())})


def upstream_of(agent: AgentSpec, entry_env: dict[str, str]) -> str:
    assert agent.llm is not None
    return entry_env.get(agent.llm.base_url_env) or agent.llm.default_base_url


def real_key(agent: AgentSpec, host_env: dict[str, str] | Any) -> tuple[str, str]:
    """(name, value) of the first of the agent's key variables that is set."""
    for name in agent.api_keys:
        if host_env.get(name):
            return name, host_env[name]
    raise HarnessError(
        f"agent {agent.name}: none of its API key variables ({', '.join(agent.api_keys) or 'none in api_keys.json'}) "
        "is set in the launching environment"
    )


#: The start of every llm_log.jsonl line (RequestLog.write): its attempt is read from there,
#: for a line holds a request body and can be megabytes long.
_LOG_LINE_START = re.compile(rb'^\{"n":\d+,"attempt":(\d+),')


def rotate_request_log(cell_dir: Path) -> None:
    """An earlier attempt's llm_log.jsonl moves aside (llm_log.attempt-<k>.jsonl; a name
    already taken, or a first line that does not say its attempt, gets a suffix: no
    earlier log is overwritten)."""
    path = cell_dir / cell_files.LLM_LOG
    if not path.exists():
        return
    with open(path, "rb") as f:
        found = _LOG_LINE_START.match(f.read(64))
    k = found.group(1).decode() if found else "earlier"
    target, n = cell_dir / cell_files.llm_log_of(k), 1
    while target.exists():
        n += 1
        target = cell_dir / cell_files.llm_log_of(f"{k}.{n}")
    path.rename(target)


@contextlib.contextmanager
def cell_gateway(
    campaign: Campaign,
    cell: Cell,
    agent: AgentSpec,
    host_env: Any,
    cell_dir: Path,
    attempt: int,
    socket_dir: Path,
) -> Iterator[GatewayProcess | None]:
    """The cell's gateway while the agent runs (None for an agent without "llm"); on a
    Unix socket in ``socket_dir`` under bwrap."""
    if agent.llm is None:
        yield None
        return
    entry = campaign.agent_entries.get(cell.agent)
    key_name, key = real_key(agent, host_env)
    solve = campaign.settings.solve
    rotate_request_log(cell_dir)
    config = GatewayConfig(
        upstream=upstream_of(agent, dict(entry.env if entry else ())),
        key=key,
        token=f"ptbgw-{secrets.token_hex(24)}",
        protocol=agent.llm.protocol,  # type: ignore[arg-type]
        log_path=cell_dir / cell_files.LLM_LOG,
        socket_path=socket_dir / SOCKET_NAME if listens_on_socket(campaign.settings.site.runtime.runtime) else None,
        limits=cell_limits(campaign, cell),
        prices=dict(solve.llm_prices),
        secrets={**secrets_from_env([*agent.api_keys, *campaign.settings.grader_key_names], host_env), key_name: key},
        max_body_bytes=solve.llm_log_max_body_kb * 1024,
        attempt=attempt,
    )
    gateway = GatewayProcess(config, host_env, cell_dir / cell_files.GATEWAY_LOG)
    try:
        gateway.start()
    except GatewayError as e:
        raise HarnessError(str(e)) from None
    where = f"socket {config.socket_path}" if config.socket_path else f"127.0.0.1:{gateway.port}"
    log.info("LLM gateway pid %d on %s, upstream %s", gateway.pid, where, config.upstream)
    try:
        yield gateway
    finally:
        gateway.stop()


def agent_env(gateway: GatewayProcess | None) -> dict[str, str]:
    """The agent's variables for its gateway (none without one)."""
    if gateway is None:
        return {}
    port = SANDBOX_PORT if gateway.config.socket_path else gateway.port
    return {BASE_URL_VAR: f"http://127.0.0.1:{port}", TOKEN_VAR: gateway.config.token}


def agent_endpoints(gateway: GatewayProcess | None) -> list[Endpoint]:
    """The sandbox endpoint of a gateway on a Unix socket (none for one on a TCP port)."""
    if gateway is None or gateway.config.socket_path is None:
        return []
    return [Endpoint(gateway.config.socket_path, SANDBOX_PORT)]


def llm_record(gateway: GatewayProcess | None, result: ProcessResult) -> dict[str, Any] | None:
    """solve.json's ``llm``: the gateway's meter once it is stopped. Raises HarnessError
    (the solve is the infrastructure's failure, a rerun repeats it as attempt N) when the
    gateway died, or the provider failed the last calls of a session the agent ended."""
    if gateway is None:
        return None
    summary = gateway.stop()
    death = gateway.death()
    if death is not None or summary is None:
        raise HarnessError(death or "the LLM gateway gave no summary when stopped")
    failure = provider_failure(summary, result)
    if failure is not None:
        raise HarnessError(failure)
    return summary


def provider_failure(summary: dict[str, Any], result: ProcessResult) -> str | None:
    """Why the session's end was the provider's doing, or None: the agent ended by itself
    (not at its time or LLM budget) after the provider failed its last calls (5xx, 429,
    the key refused, unreachable): 3 in a row, or 1 when the CLI then exited non-zero."""
    streak = int(summary.get("provider_failure_streak") or 0)
    if result.status in ("timeout", "stopped") or streak == 0:
        return None
    if streak < PROVIDER_FAILURE_STREAK and result.status == "exited" and result.exit_code == 0:
        return None
    statuses = ", ".join(f"{s}: {n}" for s, n in (summary.get("statuses") or {}).items())
    return f"the LLM provider failed the last {streak} model call(s) of the session (HTTP statuses {statuses})"
