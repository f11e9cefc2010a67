"""What an agent's session used, from its own trace: tokens, cost, turns, tool calls.

Each renderer feeds a ``TokenUsage`` from the events its CLI writes; a quantity the trace never
states stays None (unknown), never 0. ``input_tokens`` includes the cached ones
(``cached_tokens``), whatever the provider's own split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_tokens", "cost_usd", "turns", "tool_calls")
#: The most one event may add to a field: a larger (or negative, or not finite) number in
#: a trace is no usage (a tool writing into the CLI's stdout can forge events).
MAX_PER_EVENT = {"cost_usd": 10_000.0}
MAX_COUNT_PER_EVENT = 10**10


def _number(value: Any, field: str = "") -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not 0 <= value <= MAX_PER_EVENT.get(field, MAX_COUNT_PER_EVENT):  # NaN fails too
        return None
    return value


@dataclass
class TokenUsage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    turns: int | None = None
    tool_calls: int | None = None
    #: sessions started in the trace (a resumed session starts again): resumes = sessions - 1
    sessions: int | None = None

    def add(self, field: str, *values: Any) -> None:
        """Add the numbers given (ignoring anything that is not one, negative or absurd) to a field."""
        numbers = [v for v in (_number(x, field) for x in values) if v is not None]
        if numbers:
            setattr(self, field, (getattr(self, field) or 0) + sum(numbers))

    def record(self, trace_format: str) -> dict[str, Any]:
        out: dict[str, Any] = {f: getattr(self, f) for f in TOKEN_FIELDS}
        if out["cost_usd"] is not None:
            out["cost_usd"] = round(float(out["cost_usd"]), 6)
        out["resumes"] = self.sessions - 1 if self.sessions else None
        out["format"] = trace_format
        return out
