"""The gateway's meter: what a cell's model calls used and cost, and whether its limits
(``solve.llm_budget``) are reached.

Only the provider's own answers count: the tokens each answer states (a stream's
included), priced by ``ptb_harness.gateway.prices``. The limits are checked before each
model call: a call in flight when a limit is crossed completes, the next one is refused.

Metering fails closed: under a token or USD limit, a successful answer whose usage the
gateway cannot read (none stated, or not its protocol's input and output counts) ends the
session as if the limit were reached ("usage unreadable"), for an agent that can make its
provider answer without usage (a protocol option, a stream's shape, an endpoint variant)
would otherwise spend without limit. No estimate is charged instead: the bytes of a request
and its answer bound neither what the provider bills (server-side state such as Responses'
previous_response_id or Gemini's cachedContent bills a context the request does not carry;
hidden reasoning bills output the answer does not show), so an estimate undercharges the
very agent that hides its usage. A request-count limit counts such an answer like any
other. Without a limit, the answer is counted (``unmetered_answers``) and the cost is
unknown, never a partial sum.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ptb_harness.gateway.protocols import TokenUsage


@dataclass(frozen=True)
class Limits:
    """A cell's LLM budget; None = no limit. ``tokens`` counts input (cached included)
    plus output tokens; ``requests`` the model calls passed to the provider."""

    usd: float | None = None
    tokens: int | None = None
    requests: int | None = None

    def record(self) -> dict[str, Any]:
        return {"usd": self.usd, "tokens": self.tokens, "requests": self.requests}


#: What a provider failure is (not the agent's doing): its answer's status, or 0 when it
#: could not be reached. 401/403: the site's key was refused; 429: its quota or rate.
def provider_failed(status: int) -> bool:
    return status == 0 or status >= 500 or status in (401, 403, 429)


@dataclass
class Meter:
    limits: Limits = field(default_factory=Limits)
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    #: successful model calls whose usage could not be read, and answers without a price
    unmetered: int = 0
    unpriced: int = 0
    #: every answer's HTTP status (0: the provider could not be reached), the gateway's
    #: refusals by reason, and the provider failures at the end of the session
    statuses: Counter = field(default_factory=Counter)
    refused: Counter = field(default_factory=Counter)
    failure_streak: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def exhausted(self) -> str | None:
        """Which limit is reached, in words, or None."""
        lim = self.limits
        if lim.usd is not None and self.cost_usd >= lim.usd:
            return f"cost ${self.cost_usd:.4f} of ${lim.usd:g}"
        if lim.tokens is not None and self.tokens >= lim.tokens:
            return f"tokens {self.tokens} of {lim.tokens}"
        if lim.requests is not None and self.requests >= lim.requests:
            return f"requests {self.requests} of {lim.requests}"
        counted = [name for name, limit in (("tokens", lim.tokens), ("USD", lim.usd)) if limit is not None]
        if counted and self.unmetered:
            n = self.unmetered
            return (
                f"usage unreadable: {n} answer{'s' if n > 1 else ''} without readable usage, "
                f"which the {' and '.join(counted)} limit cannot count"
            )
        return None

    def add(
        self, status: int, latency_ms: float, usage: TokenUsage | None, cost: float | None, readable: bool = True
    ) -> None:
        """One model call passed to the provider, and its answer (``readable``: its usage
        is its protocol's whole statement; without usage it is not)."""
        self.requests += 1
        self.statuses[status] += 1
        self.latencies_ms.append(latency_ms)
        self.failure_streak = self.failure_streak + 1 if provider_failed(status) else 0
        self.unmetered += 200 <= status < 300 and (usage is None or not readable)
        if usage is None:
            return
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cached_tokens += usage.cached_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        if cost is None:
            self.unpriced += usage.total > 0
        else:
            self.cost_usd += cost

    def totals(self) -> dict[str, Any]:
        """The running totals (each llm_log.jsonl line carries them)."""
        return {
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            # unknown (None) when an answer with tokens had no price, or an answer's usage
            # could not be read: never a partial sum
            "cost_usd": round(self.cost_usd, 6) if not (self.unpriced or self.unmetered) else None,
            "unmetered_answers": self.unmetered,
        }

    def summary(self) -> dict[str, Any]:
        """The meter as recorded in solve.json's ``llm``."""
        errors = sum(n for s, n in self.statuses.items() if s != 200)
        return {
            **self.totals(),
            "source": "gateway",
            "unpriced_answers": self.unpriced,
            "http_errors": errors,
            "statuses": {str(s): n for s, n in sorted(self.statuses.items())},
            "refused": dict(sorted(self.refused.items())),
            "provider_failure_streak": self.failure_streak,
            "latency_ms": latency_summary(self.latencies_ms),
            "limits": self.limits.record(),
            "exhausted": self.exhausted(),
        }


def latency_summary(values: list[float]) -> dict[str, float] | None:
    """p50, p99 and max of the provider's answer times (ms), nearest rank."""
    if not values:
        return None
    s = sorted(values)

    def rank(q: float) -> float:
        return round(s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))], 1)

    return {"p50": rank(0.5), "p99": rank(0.99), "max": round(s[-1], 1)}


#: What counts as a large disagreement between the trace's usage and the gateway's: a
#: relative difference above this (the CLIs' own counts differ a little: side calls, the
#: last answer of a session stopped mid-stream).
DISAGREEMENT = 0.10
_COMPARED = ("input_tokens", "output_tokens", "cost_usd")


def usage_record(trace: dict[str, Any], meter: dict[str, Any] | None) -> dict[str, Any]:
    """usage.json: with a gateway meter (solve.json's ``llm``), its tokens, cost and
    requests (``source: gateway``) and the trace's own figures as ``agent_reported``, a
    large difference named in ``disagreement``; without one, the trace's (``source: trace``)."""
    if not meter:
        return {**trace, "source": "trace"}
    reported = {k: trace.get(k) for k in ("input_tokens", "output_tokens", "cached_tokens", "cost_usd")}
    out = {**trace, **{k: meter.get(k) for k in reported}, "requests": meter.get("requests")}
    return {**out, "source": "gateway", "agent_reported": reported, "disagreement": disagreement(meter, reported)}


def disagreement(meter: dict[str, Any], reported: dict[str, Any]) -> str | None:
    """The quantities on which the trace and the gateway differ by more than DISAGREEMENT
    (a quantity the trace does not state is no disagreement), in words; None if none."""
    parts = []
    for key in _COMPARED:
        ours, theirs = meter.get(key), reported.get(key)
        if not isinstance(ours, int | float) or not isinstance(theirs, int | float):
            continue
        if abs(ours - theirs) > DISAGREEMENT * max(abs(ours), abs(theirs), 1):
            parts.append(f"{key}: gateway {ours}, agent reported {theirs}")
    return "; ".join(parts) or None
