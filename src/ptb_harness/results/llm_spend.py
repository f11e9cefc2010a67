"""What a campaign's agents spent on their models so far, per entry, from each cell's LLM
gateway logs (``llm_log.jsonl`` and every earlier attempt's): the last line of a log
carries its gateway's running totals, so a cell still running counts up to its last call,
and an attempt that failed counts what it spent. Read from each log's tail only (a line
holds its request's and answer's bodies)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from typing import Any

from ptb_harness.core.cell_files import is_llm_log
from ptb_harness.core.records import read_record_tail
from ptb_scorer.llm_client import token_count, usd_amount

#: How much of a log's end is read: its last line's totals (a few hundred bytes) follow
#: that line's bodies, each cut to solve.llm_log_max_body_kb; a line whose totals are not
#: in this tail counts as a log of unknown cost.
TAIL_BYTES = 8 * 1024
_TOTALS = b'"totals":{'
_COUNTS = ("requests", "input_tokens", "output_tokens")


@dataclass(frozen=True)
class Spend:
    """Model calls of some cells, as their gateways metered them."""

    #: cells with a request log
    cells: int = 0
    #: the known costs, summed; ``unknown_cells`` had a log whose cost is not known
    cost_usd: float = 0.0
    unknown_cells: int = 0
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Spend) -> Spend:
        return Spend(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Spend)))

    def record(self) -> dict[str, Any]:
        return {**{f.name: getattr(self, f.name) for f in fields(Spend)}, "cost_usd": round(self.cost_usd, 6)}


def log_totals(path: str) -> dict[str, Any] | None:
    """The running totals on a request log's last whole line, or None when they cannot be
    read (no such line in its tail, not the gateway's shape)."""
    data, _ = read_record_tail(path, TAIL_BYTES)
    if not data:
        return None
    end = data.rfind(b"\n")  # the last whole line: a running gateway may be writing the next
    start = data.rfind(_TOTALS, 0, end) if end > 0 else -1
    if start < 0 or b"\n" in data[start:end]:
        return None
    try:
        totals = json.loads(data[start + len(_TOTALS) - 1 : end].rstrip().removesuffix(b"}"))
    except ValueError:
        return None
    ok = isinstance(totals, dict) and all(token_count(totals.get(k)) is not None for k in _COUNTS)
    return totals if ok else None


def cell_spend(cell_dir: str) -> Spend | None:
    """What the cell's gateways metered over all its attempts; None without a request log.
    Its cost is unknown when any log's is (an unpriced or unmetered answer, a log that
    cannot be read): then only the known part is summed, and the cell counted as unknown."""
    try:
        names = [e.name for e in os.scandir(cell_dir) if is_llm_log(e.name)]
    except OSError:
        return None
    if not names:
        return None
    cost, unknown, counts = 0.0, False, dict.fromkeys(_COUNTS, 0)
    for name in names:
        totals = log_totals(os.path.join(cell_dir, name))
        if totals is None:
            unknown = True
            continue
        for k in _COUNTS:
            counts[k] += totals[k]
        known = usd_amount(totals.get("cost_usd"))
        unknown = unknown or known is None
        cost += known or 0.0
    return Spend(cells=1, cost_usd=cost, unknown_cells=int(unknown), **counts)


def usd_text(value: float) -> str:
    """A cost in cents, or four decimals under a cent (never $0.00 when it is not 0)."""
    return f"${value:,.2f}" if abs(value) >= 0.01 or value == 0 else f"${value:.4f}"


def spend_line(spend: Spend) -> str:
    """``$12.34 in 57 cells (2 of unknown cost), 3,210 requests, 1.2M tokens in, 30k out``."""
    unknown = f" ({spend.unknown_cells} of unknown cost, not in the sum)" if spend.unknown_cells else ""
    cells = f"{spend.cells} cell{'s' if spend.cells != 1 else ''}"
    return (
        f"{usd_text(spend.cost_usd)} in {cells}{unknown}, {spend.requests:,} requests, "
        f"{_short(spend.input_tokens)} tokens in, {_short(spend.output_tokens)} out"
    )


def _short(n: int) -> str:
    for size, unit in ((10**9, "G"), (10**6, "M"), (10**3, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}".replace(".0", "")
    return str(n)
