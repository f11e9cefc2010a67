"""What an agent's session used, from its own trace: tokens, cost, turns, tool calls.

Each renderer feeds a ``TokenUsage`` from the events its CLI writes; a quantity the trace never
states stays None (unknown), never 0. ``input_tokens`` includes the cached ones
(``cached_tokens``), whatever the provider's own split.
"""

from __future__ import annotations

from typing import Any

from ptb_harness.core.cell_files import USAGE_QUANTITIES

#: what a trace's events add up to: usage.json's quantities but resumes (the sessions
#: started are counted instead: resumes = sessions - 1)
TOKEN_FIELDS = tuple(q for q in USAGE_QUANTITIES if q != "resumes")
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


class TokenUsage:
    """A trace's totals so far: each of TOKEN_FIELDS and ``sessions`` (sessions started in
    the trace: a resumed session starts again), None until an event states it."""

    def __init__(self) -> None:
        self.totals: dict[str, float | None] = dict.fromkeys((*TOKEN_FIELDS, "sessions"))

    def add(self, field: str, *values: Any) -> None:
        """Add the numbers given (ignoring anything that is not one, negative or absurd) to a field."""
        numbers = [v for v in (_number(x, field) for x in values) if v is not None]
        if numbers:
            self.totals[field] = (self.totals[field] or 0) + sum(numbers)

    def record(self, trace_format: str) -> dict[str, Any]:
        out: dict[str, Any] = {f: self.totals[f] for f in TOKEN_FIELDS}
        if out["cost_usd"] is not None:
            out["cost_usd"] = round(float(out["cost_usd"]), 6)
        sessions = self.totals["sessions"]
        out["resumes"] = sessions - 1 if sessions else None
        out["format"] = trace_format
        return out
