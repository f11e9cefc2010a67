"""An HTTP client of LLMs on any OpenAI-compatible Chat Completions endpoint (OpenAI,
OpenRouter, a local vLLM server, ...): the graded tasks' grader models and the judge.

One client serves the graded tasks' scorers (arenahardwriting, healthbench, run inside
the scorer sandbox) and the harness's judge stage: it is part of the scorer library (no
ptb_harness import; the harness imports it, as it does ptb_scorer.data). It:

- reads the endpoint from an :class:`Endpoint` (no secret in it: it names the variable
  that holds the key, and the key is read from the environment at call time);
- retries 429s, 5xx answers, timeouts, dropped connections and malformed bodies with
  exponential backoff and full jitter (a server's ``Retry-After`` is honoured, capped);
- stops at a request budget (every HTTP request counts, retries included), so a grader
  loop can never run up an unbounded bill;
- counts requests, retries, statuses, tokens and (with prices given) cost, for the
  metrics and verdict files: :meth:`LLMClient.call_stats`.

A model that cannot answer raises :class:`LLMUnavailable` with one line saying why;
scorers turn it into a failed attempt (an infrastructure failure, never a score: see
:mod:`ptb_scorer.protocol`).

Built on httpx rather than the ``openai`` package: the openai client's built-in retries
hide the number of requests (the budget and the accounting need each one), and its
response parsing is lax (a 200 with a non-JSON body comes back as a string, not an
error), so we would wrap both anyway. httpx gives pooled, thread-safe connections and
connect/read/write timeouts; the request itself is one POST.
"""

from __future__ import annotations

import json
import math
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

from ptb_scorer.protocol import GRADER_ENV

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")
R = TypeVar("R")


class LLMUnavailable(Exception):
    """The model could not give an answer (after retries, or the budget is spent)."""


class LLMConfigError(LLMUnavailable):
    """The endpoint is misconfigured (no key in the named variable, a bad URL, 401/404)."""


def token_count(value: Any, most: int | None = None) -> int | None:
    """An API's token count: an int (never a bool: JSON's true is no count) from 0 to
    ``most``; None for anything else. The one reader of a count for this client's answers,
    the harness's LLM gateway (``most``: what one answer may state) and its logs' totals."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value if most is None or value <= most else None


def usd_amount(value: Any) -> float | None:
    """An amount of US$ an API or a log states: a finite number from 0 (never a bool, and
    never JSON's 1e999, which reads as infinity and would be written back as Infinity, no
    JSON at all); None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


@dataclass(frozen=True)
class Endpoint:
    """Where a grader or judge model is and how to talk to it. Holds no secret."""

    base_url: str
    model: str
    #: name of the environment variable holding the API key; null = no auth header (a local vLLM)
    api_key_env: str | None = "PTB_GRADER_API_KEY"
    concurrency: int = 4
    timeout_seconds: float = 120.0
    max_retries: int = 5
    #: every HTTP request counts, retries included
    max_requests: int = 5000
    backoff_seconds: float = 1.0
    backoff_max_seconds: float = 60.0
    temperature: float = 0.0
    #: US$ per million prompt / completion tokens, for the cost line; null = cost unknown
    usd_per_million_input: float | None = None
    usd_per_million_output: float | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "endpoint") -> Endpoint:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise LLMConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        for key in ("base_url", "model"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise LLMConfigError(f"{where}.{key}: required (a non-empty string)")
        if not data["base_url"].startswith(("http://", "https://")):
            raise LLMConfigError(f"{where}.base_url: {data['base_url']!r} is not an http(s) URL")
        ep = cls(**dict(data))
        if ep.concurrency < 1 or ep.max_requests < 1 or ep.max_retries < 0 or ep.timeout_seconds <= 0:
            raise LLMConfigError(
                f"{where}: concurrency, max_requests and timeout_seconds must be positive, max_retries >= 0"
            )
        return ep

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_env(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_environ(cls, env: Mapping[str, str] | None = None) -> Endpoint | None:
        """The endpoint the harness handed this process in PTB_GRADER, or None."""
        env = os.environ if env is None else env
        raw = env.get(GRADER_ENV)
        if not raw:
            return None
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise LLMConfigError(f"{GRADER_ENV}: not valid JSON ({e})") from None
        if not isinstance(data, dict):
            raise LLMConfigError(f"{GRADER_ENV}: must hold a JSON object")
        return cls.from_dict(data, GRADER_ENV)


@dataclass
class CallStats:
    """What this client's calls cost; ``as_dict`` goes into metrics/verdict files."""

    requests: int = 0
    retries: int = 0
    answered: int = 0
    failed_calls: int = 0
    statuses: Counter = field(default_factory=Counter)
    timeouts: int = 0
    connection_errors: int = 0
    malformed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: cost the endpoint reported (OpenRouter's usage.cost), summed
    reported_cost_usd: float = 0.0

    def cost_usd(self, ep: Endpoint) -> float | None:
        if self.reported_cost_usd:
            return round(self.reported_cost_usd, 6)
        if ep.usd_per_million_input is None or ep.usd_per_million_output is None:
            return None
        cost = self.prompt_tokens * ep.usd_per_million_input + self.completion_tokens * ep.usd_per_million_output
        return round(cost / 1e6, 6)

    def as_dict(self, ep: Endpoint) -> dict[str, Any]:
        return {
            "model": ep.model,
            "base_url": ep.base_url,
            "requests": self.requests,
            "retries": self.retries,
            "answered": self.answered,
            "failed_calls": self.failed_calls,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "timeouts": self.timeouts,
            "connection_errors": self.connection_errors,
            "malformed": self.malformed,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd(ep),
            "max_requests": ep.max_requests,
        }


class _Retry(Exception):
    def __init__(self, why: str, wait_s: float | None = None):
        super().__init__(why)
        self.wait_s = wait_s


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: use our own backoff


class LLMClient:
    """Thread-safe; use :meth:`map` to grade many items with the endpoint's concurrency."""

    def __init__(
        self,
        endpoint: Endpoint,
        env: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ):
        self.endpoint = endpoint
        env = os.environ if env is None else env
        headers = {"Content-Type": "application/json"}
        if endpoint.api_key_env:
            key = env.get(endpoint.api_key_env)
            if not key:
                raise LLMConfigError(
                    f"grader key variable {endpoint.api_key_env} is not set (needed for {endpoint.base_url})"
                )
            headers["Authorization"] = f"Bearer {key}"
        # imported here: every command that loads a campaign imports this module (for
        # Endpoint), and httpx alone took a third of `ptb-harness status`'s fixed cost
        import httpx

        t = endpoint.timeout_seconds
        self._http = httpx.Client(
            base_url=endpoint.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(t, connect=min(t, 30.0)),
            limits=httpx.Limits(max_connections=endpoint.concurrency),
            transport=transport,
            trust_env=False,  # no proxy or netrc from the environment: the URL is the whole truth
        )
        self._sleep = sleep
        self._lock = threading.Lock()
        self._stats = CallStats()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def call_stats(self) -> dict[str, Any]:
        with self._lock:
            return self._stats.as_dict(self.endpoint)

    # -- one call ----------------------------------------------------------------------------
    def _count(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                setattr(self._stats, k, getattr(self._stats, k) + v)

    def _take_request(self) -> None:
        with self._lock:
            if self._stats.requests >= self.endpoint.max_requests:
                raise LLMUnavailable(
                    f"grader request budget spent ({self.endpoint.max_requests} requests to {self.endpoint.base_url})"
                )
            self._stats.requests += 1

    def _once(self, body: dict[str, Any]) -> str:
        import httpx

        try:
            response = self._http.post("chat/completions", json=body)
        except httpx.TimeoutException as e:
            self._count(timeouts=1)
            raise _Retry(f"no answer within {self.endpoint.timeout_seconds:g} s ({type(e).__name__})") from None
        except httpx.TransportError as e:
            self._count(connection_errors=1)
            raise _Retry(f"connection failed ({type(e).__name__}: {str(e)[:120]})") from None
        with self._lock:
            self._stats.statuses[response.status_code] += 1
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Retry(f"HTTP {status}", _retry_after(response))
        if status in (401, 403):
            raise LLMConfigError(
                f"HTTP {status} from {self.endpoint.base_url}: the key in {self.endpoint.api_key_env} was refused"
            )
        if status != 200:
            raise LLMConfigError(f"HTTP {status} from {self.endpoint.base_url}: {response.text[:200]!r}")
        try:
            data = response.json()
            content = data["choices"][0]["message"]["content"]
            if not isinstance(content, str):
                raise TypeError("content is not a string")
        except (ValueError, KeyError, IndexError, TypeError) as e:
            self._count(malformed=1)
            raise _Retry(f"malformed answer ({type(e).__name__}: {str(e)[:80]}): {response.text[:120]!r}") from None
        self._add_usage(data.get("usage") if isinstance(data.get("usage"), dict) else {})
        return content

    def _add_usage(self, usage: dict[str, Any]) -> None:
        """Add an answer's token counts and reported cost (where they are numbers) to the totals."""
        with self._lock:
            for ours, theirs in (("prompt_tokens", "prompt_tokens"), ("completion_tokens", "completion_tokens")):
                v = token_count(usage.get(theirs))
                if v is not None:
                    setattr(self._stats, ours, getattr(self._stats, ours) + v)
            cost = usd_amount(usage.get("cost"))
            if cost is not None:
                self._stats.reported_cost_usd += cost

    def chat(self, messages: list[dict[str, str]], *, max_tokens: int | None = None, **extra: Any) -> str:
        """The model's answer text; retried as the endpoint says. Raises LLMUnavailable."""
        ep = self.endpoint
        body: dict[str, Any] = {"model": ep.model, "messages": messages, "temperature": ep.temperature, **extra}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        why = ""
        for attempt in range(ep.max_retries + 1):
            if attempt:
                self._count(retries=1)
            self._take_request()
            try:
                content = self._once(body)
            except _Retry as r:
                why = str(r)
                if attempt == ep.max_retries:
                    break
                backoff = random.uniform(0, min(ep.backoff_max_seconds, ep.backoff_seconds * 2**attempt))
                self._sleep(min(ep.backoff_max_seconds, r.wait_s) if r.wait_s is not None else backoff)
                continue
            except LLMUnavailable:
                self._count(failed_calls=1)
                raise
            self._count(answered=1)
            return content
        self._count(failed_calls=1)
        raise LLMUnavailable(f"grader {ep.model} at {ep.base_url}: {why} after {ep.max_retries + 1} tries")

    # -- many calls --------------------------------------------------------------------------
    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """fn over items with the endpoint's concurrency, results in order. The first
        LLMUnavailable stops the rest (queued items are cancelled) and is raised."""
        items = list(items)
        if self.endpoint.concurrency == 1 or len(items) <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(self.endpoint.concurrency, thread_name_prefix="grader") as pool:
            futures = [pool.submit(fn, x) for x in items]
            try:
                return [f.result() for f in futures]
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
