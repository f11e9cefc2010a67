"""The harness's side of a cell's gateway: start the process, learn where it listens,
hear when the budget is exhausted (sync(): every event it said so far heard), stop it and
collect its meter.

The gateway is a child of the harness (outside every sandbox), started with the
harness's interpreter and package; its config, the real key included, goes down its
stdin (a pipe), so the key is in no argv, environment or file. Its stdin stays open for
its lifetime: when the harness closes it, or dies, the gateway stops.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import ptb_harness
from ptb_harness.gateway.config import GatewayConfig

#: Variables of the launching environment the gateway process gets (no secret: its key
#: comes on stdin): where to find Python and its package, the site's proxy and TLS roots.
PASSED_VARIABLES = (
    "PATH", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV", "SSL_CERT_FILE", "SSL_CERT_DIR",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
)  # fmt: skip
STARTUP_TIMEOUT_S = 60.0


class GatewayError(RuntimeError):
    """The gateway could not start, or died: the infrastructure's failure, not the agent's."""


class GatewayProcess:
    """``with GatewayProcess(config, host_env, log) as gw: gw.port / gw.socket_path ...``"""

    def __init__(self, config: GatewayConfig, host_env: Mapping[str, str], stderr: Path):
        self.config = config
        self.host_env = host_env
        self.stderr_path = stderr
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready: dict[str, Any] = {}
        self.summary: dict[str, Any] | None = None
        #: set when the gateway refused a call at the budget's limit; ``exhausted_reason`` says which
        self.exhausted = threading.Event()
        self.exhausted_reason: str | None = None
        #: set when the agent must be stopped: its budget is spent, or the gateway died
        self.stop_agent = threading.Event()
        self._ready = threading.Event()
        #: the last ``sync`` the gateway answered (sync())
        self._synced = threading.Condition()
        self._sync_sent = self._sync_answered = 0
        self._reader: threading.Thread | None = None
        self._stopping = False

    # -- start ----------------------------------------------------------------------------
    def start(self, timeout_s: float = STARTUP_TIMEOUT_S) -> GatewayProcess:
        env = {k: self.host_env[k] for k in PASSED_VARIABLES if k in self.host_env}
        # the harness's own package (a frozen snapshot under `ptb-harness run`) comes first
        package_root = str(Path(ptb_harness.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ptb_harness.gateway"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                close_fds=True,
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(self.config.to_json().encode() + b"\n")
        self.proc.stdin.flush()
        self._reader = threading.Thread(target=self._read_events, args=(self.proc.stdout,), daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout_s) or not self.ready:
            self.stop()
            raise GatewayError(f"the LLM gateway did not start within {timeout_s:.0f} s{self._stderr_tail()}")
        return self

    def _read_events(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event.get("event") if isinstance(event, dict) else None
            if kind == "ready":
                self.ready = event
                self._ready.set()
            elif kind == "llm_budget_exhausted":
                self.exhausted_reason = str(event.get("reason"))
                self.exhausted.set()
                self.stop_agent.set()
            elif kind == "summary":
                self.summary = event.get("meter")
            elif kind == "synced":
                with self._synced:
                    self._sync_answered = int(event.get("n") or 0)
                    self._synced.notify_all()
        self._ready.set()  # it ended: nobody waits for a ready that never comes
        if not self._stopping:  # it died: the agent can reach no model any more
            self.stop_agent.set()

    def sync(self, timeout_s: float = 5.0) -> bool:
        """Wait until every event the gateway said before now is handled here (an agent that
        exits at once on a refusal can end before its ``llm_budget_exhausted`` is read).
        False when the gateway did not answer in time, or is gone."""
        if self.proc is None or self.proc.stdin is None or not self.alive():
            return False
        with self._synced:
            self._sync_sent += 1
            n = self._sync_sent
            try:
                self.proc.stdin.write(f"sync {n}\n".encode())
                self.proc.stdin.flush()
            except (OSError, ValueError):
                return False
            return self._synced.wait_for(lambda: self._sync_answered >= n, timeout_s)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def port(self) -> int | None:
        return self.ready.get("port")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def death(self) -> str | None:
        """Why the gateway is gone before it was stopped (None while it lives, or when the
        harness stopped it)."""
        if self.proc is None or self.proc.poll() is None or (self._stopping and self.summary is not None):
            return None
        return f"the LLM gateway exited with code {self.proc.returncode} during the solve{self._stderr_tail()}"

    # -- stop -----------------------------------------------------------------------------
    def stop(self, timeout_s: float = 15.0) -> dict[str, Any] | None:
        """Close its stdin (it finishes the requests in flight, says its summary, exits);
        TERM, then KILL, if it does not. Returns the summary, or None when it gave none."""
        if self.proc is None:
            return None
        self._stopping = True
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        for sig in (None, "terminate", "kill"):
            if sig is not None:
                with contextlib.suppress(ProcessLookupError):
                    getattr(self.proc, sig)()
            try:
                self.proc.wait(timeout_s)
                break
            except subprocess.TimeoutExpired:
                continue
        if self._reader is not None:
            self._reader.join(timeout=5)
        return self.summary

    def _stderr_tail(self) -> str:
        try:
            text = self.stderr_path.read_bytes()[-600:].decode("utf-8", "replace").strip()
        except OSError:
            return ""
        return f": {text.splitlines()[-1]}" if text else ""

    def __enter__(self) -> GatewayProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
