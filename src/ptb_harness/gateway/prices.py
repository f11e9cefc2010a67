"""What an answer cost: the campaign's own prices for a model when it names them, else the
maintained table of the ``genai-prices`` package (Pydantic's; its bundled data, never a
download at run time).

Prices are USD per million tokens. ``input`` is charged on the uncached input tokens,
``cache_read`` and ``cache_write`` on the cached ones (each defaults to ``input`` when
not given), ``output`` on the output (reasoning included).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from ptb_harness.gateway.protocols import Protocol, TokenUsage

#: The table's provider for each protocol, when the upstream's URL names none it knows.
_PROVIDER = {"anthropic": "anthropic", "openai_responses": "openai", "openai_chat": "openai", "gemini": "google"}


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens (the campaign's ``solve.llm_prices`` for one model)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, u: TokenUsage) -> float:
        uncached = max(0, u.input_tokens - u.cached_tokens - u.cache_write_tokens)
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (
            uncached * self.input
            + u.cached_tokens * read
            + u.cache_write_tokens * write
            + u.output_tokens * self.output
        ) / 1e6


@dataclass(frozen=True)
class Cost:
    usd: float | None
    #: where the price came from: "campaign", "genai-prices <version>", or None (no price)
    source: str | None


class PriceTable:
    """The campaign's overrides (by model name, also matched after a ``provider/`` prefix)
    before the package's table for the upstream's provider."""

    def __init__(self, overrides: Mapping[str, ModelPrice], upstream: str):
        self.overrides = dict(overrides)
        self.upstream = upstream

    def override(self, model: str | None) -> ModelPrice | None:
        if model is None:
            return None
        return self.overrides.get(model) or self.overrides.get(model.rsplit("/", 1)[-1])

    def known(self, model: str | None, protocol: Protocol) -> bool:
        """Whether the model has a price (asked before a request under a USD budget)."""
        return self.cost(model, protocol, TokenUsage(1, 1)).usd is not None

    def cost(self, model: str | None, protocol: Protocol, usage: TokenUsage) -> Cost:
        own = self.override(model)
        if own is not None:
            return Cost(own.cost(usage), "campaign")
        if model is None:
            return Cost(None, None)
        usd = _table_cost(model, _PROVIDER[protocol], self.upstream, usage)
        return Cost(usd, f"genai-prices {table_version()}" if usd is not None else None)


@lru_cache(maxsize=1)
def table_version() -> str:
    from importlib.metadata import version

    return version("genai-prices")


def warm_up() -> None:
    """Load the package's table now (about a second), not on the first answer."""
    _table_cost("gpt-4o", "openai", "https://api.openai.com/v1", TokenUsage(1, 1))


def _table_cost(model: str, provider: str, upstream: str, u: TokenUsage) -> float | None:
    """The package's price: first for the provider the upstream URL names, then for the
    protocol's provider; None when the table has neither."""
    import genai_prices

    usage = genai_prices.Usage(
        input_tokens=u.input_tokens,
        cache_read_tokens=u.cached_tokens,
        cache_write_tokens=u.cache_write_tokens,
        output_tokens=u.output_tokens,
    )
    for where in ({"provider_api_url": upstream}, {"provider_id": provider}):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return float(genai_prices.calc_price(usage, model, **where).total_price)  # type: ignore[call-overload]
        except (LookupError, ValueError):
            continue
    return None
