"""The grader client against the stand-in grader server (tests/grader_standin.py): real
HTTP on 127.0.0.1, scripted 429/500/hang/garbage answers."""

from __future__ import annotations

import json
import time

import pytest
from grader_standin import StandInGrader

from ptb_scorer.llm_client import (
    GRADER_ENV,
    Endpoint,
    LLMClient,
    LLMConfigError,
    LLMUnavailable,
    usd_amount,
)

KEY = "sk-planted-grader-key-0123456789abcdef"


def endpoint(url: str, **kw) -> Endpoint:
    base = {"base_url": url, "model": "standin-judge", "api_key_env": "PTB_GRADER_API_KEY", "backoff_seconds": 0.01}
    return Endpoint.from_dict({**base, **kw})


def client(url: str, **kw) -> LLMClient:
    return LLMClient(endpoint(url, **kw), env={"PTB_GRADER_API_KEY": KEY})


def test_answer_usage_and_auth_header():
    with StandInGrader(script=[("answer", "[[A>B]]")]) as server:
        c = client(server.base_url, usd_per_million_input=2.0, usd_per_million_output=8.0)
        assert c.chat([{"role": "user", "content": "which is better?"}], max_tokens=50) == "[[A>B]]"
        usage = c.call_stats()
    (req,) = server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.body["model"] == "standin-judge" and req.body["max_tokens"] == 50 and req.body["temperature"] == 0.0
    assert usage["requests"] == 1 and usage["retries"] == 0 and usage["statuses"] == {"200": 1}
    assert usage["prompt_tokens"] == 10 and usage["completion_tokens"] == 5
    assert usage["cost_usd"] == pytest.approx((10 * 2.0 + 5 * 8.0) / 1e6)


# a cost the endpoint states (OpenRouter's usage.cost) or a log's total: JSON's 1e999 reads
# as infinity, which would be written back as Infinity (no JSON) and sum to an infinite spend
@pytest.mark.parametrize(
    ("value", "amount"),
    [(0, 0.0), (0.25, 0.25), (3, 3.0), (-0.01, None), (True, None), (json.loads("1e999"), None)]
    + [(float("nan"), None), ("0.1", None), (None, None), ([1], None)],
)
def test_a_stated_usd_amount_is_a_finite_number_from_0(value, amount):
    assert usd_amount(value) == amount


def test_429_and_500_are_retried_and_counted():
    script = [("status", 429), ("status", 500), ("status", 503), ("answer", "fine")]
    with StandInGrader(script=script) as server:
        c = client(server.base_url)
        assert c.chat([{"role": "user", "content": "q"}]) == "fine"
        usage = c.call_stats()
    assert len(server.requests) == 4
    assert usage["requests"] == 4 and usage["retries"] == 3 and usage["answered"] == 1
    assert usage["statuses"] == {"200": 1, "429": 1, "500": 1, "503": 1}


def test_a_grader_that_never_answers_fails_with_a_reason():
    with StandInGrader(default=lambda req: ("hang", 5)) as server:
        c = client(server.base_url, timeout_seconds=0.3, max_retries=1)
        t0 = time.monotonic()
        with pytest.raises(LLMUnavailable, match=r"no answer within 0.3 s .* after 2 tries"):
            c.chat([{"role": "user", "content": "q"}])
        assert time.monotonic() - t0 < 3
        assert c.call_stats()["timeouts"] == 2 and c.call_stats()["failed_calls"] == 1


def test_garbage_is_retried_then_fails():
    with StandInGrader(default=lambda req: ("garbage", b"<html>proxy error</html>")) as server:
        c = client(server.base_url, max_retries=2)
        with pytest.raises(LLMUnavailable, match="malformed answer"):
            c.chat([{"role": "user", "content": "q"}])
        assert c.call_stats()["malformed"] == 3 and len(server.requests) == 3


def test_request_budget_stops_the_calls():
    with StandInGrader(default=lambda req: ("status", 500)) as server:
        c = client(server.base_url, max_retries=10, max_requests=4)
        with pytest.raises(LLMUnavailable, match=r"request budget spent \(4 requests"):
            c.chat([{"role": "user", "content": "q"}])
        assert len(server.requests) == 4


def test_refused_key_is_not_retried_and_never_echoed():
    with StandInGrader(script=[("status", 401)]) as server:
        c = client(server.base_url)
        with pytest.raises(LLMConfigError, match="PTB_GRADER_API_KEY was refused") as e:
            c.chat([{"role": "user", "content": "q"}])
        assert KEY not in str(e.value) and len(server.requests) == 1


def test_missing_key_variable_is_named():
    with pytest.raises(LLMConfigError, match="grader key variable PTB_GRADER_API_KEY is not set"):
        LLMClient(endpoint("http://127.0.0.1:9/v1"), env={})


def test_no_key_for_a_local_server():
    with StandInGrader(script=[("answer", "x")]) as server:
        c = LLMClient(endpoint(server.base_url, api_key_env=None), env={})
        c.chat([{"role": "user", "content": "q"}])
    assert "authorization" not in server.requests[0].headers


def test_map_keeps_order_with_concurrency():
    with StandInGrader(default=lambda req: ("answer", req.text.upper())) as server:
        c = client(server.base_url, concurrency=4)
        out = c.map(lambda s: c.chat([{"role": "user", "content": s}]), [f"q{i}" for i in range(12)])
    assert out == [f"Q{i}" for i in range(12)]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"model": "m"}, "endpoint.base_url: required"),
        ({"base_url": "ftp://x", "model": "m"}, "is not an http"),
        ({"base_url": "http://x", "model": "m", "colour": 1}, "unknown key"),
        ({"base_url": "http://x", "model": "m", "concurrency": 0}, "must be positive"),
    ],
)
def test_bad_endpoints(data, message):
    with pytest.raises(LLMConfigError, match=message):
        Endpoint.from_dict(data)


def test_endpoint_round_trips_through_the_environment_without_a_key():
    ep = endpoint("http://127.0.0.1:1/v1")
    env = {GRADER_ENV: ep.to_env()}
    assert Endpoint.from_environ(env) == ep
    assert KEY not in env[GRADER_ENV] and json.loads(env[GRADER_ENV])["api_key_env"] == "PTB_GRADER_API_KEY"
