"""What one cell's gateway is told when it starts: one JSON line on its stdin (an inherited
pipe: the key is in no argv, environment or file)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptb_harness.gateway.meter import Limits
from ptb_harness.gateway.prices import ModelPrice
from ptb_harness.gateway.protocols import PROTOCOLS, Protocol

#: The most a request body may hold (a long conversation is a few MB).
MAX_REQUEST_BYTES = 64 * 2**20


@dataclass(frozen=True)
class GatewayConfig:
    #: the provider's base URL, as the CLI would have used it (the request's path follows it)
    upstream: str
    #: the entry's real key, swapped in for the token
    key: str
    #: this cell's per-attempt token: the only credential the gateway accepts
    token: str
    #: the protocol whose error shape answers requests no route names (its CLI's)
    protocol: Protocol
    log_path: Path
    #: a Unix socket to listen on, or None for a loopback TCP port (runtime none)
    socket_path: Path | None = None
    limits: Limits = field(default_factory=Limits)
    prices: dict[str, ModelPrice] = field(default_factory=dict)
    #: every secret the log is sanitized of (name -> value): the key, the token, the
    #: launching environment's secrets
    secrets: dict[str, str] = field(default_factory=dict)
    max_body_bytes: int = 64 * 1024
    attempt: int = 1

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol {self.protocol!r} is not one of {', '.join(PROTOCOLS)}")

    def to_json(self) -> str:
        return json.dumps(
            {
                "upstream": self.upstream,
                "key": self.key,
                "token": self.token,
                "protocol": self.protocol,
                "log_path": str(self.log_path),
                "socket_path": str(self.socket_path) if self.socket_path else None,
                "limits": self.limits.record(),
                "prices": {m: vars(p) for m, p in self.prices.items()},
                "secrets": self.secrets,
                "max_body_bytes": self.max_body_bytes,
                "attempt": self.attempt,
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> GatewayConfig:
        d: dict[str, Any] = json.loads(text)
        return cls(
            upstream=d["upstream"],
            key=d["key"],
            token=d["token"],
            protocol=d["protocol"],
            log_path=Path(d["log_path"]),
            socket_path=Path(d["socket_path"]) if d.get("socket_path") else None,
            limits=Limits(**d.get("limits") or {}),
            prices={m: ModelPrice(**p) for m, p in (d.get("prices") or {}).items()},
            secrets=dict(d.get("secrets") or {}),
            max_body_bytes=int(d.get("max_body_bytes", 64 * 1024)),
            attempt=int(d.get("attempt", 1)),
        )
