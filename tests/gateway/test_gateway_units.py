"""The gateway's decisions as pure functions: routes, usage fields, prices, the meter's
limits, the log's cut."""

from __future__ import annotations

import itertools
import json

import genai_prices
import pytest

from ptb_harness.gateway.meter import Limits, Meter, latency_summary
from ptb_harness.gateway.prices import ModelPrice, PriceTable
from ptb_harness.gateway.protocols import Route, TokenUsage, UsageReader, error_body, route, wants_usage_added
from ptb_harness.gateway.request_log import CappedBody
from ptb_harness.traces.redact import Redactor


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("POST", "/v1/messages", Route("anthropic", True)),
        ("POST", "/api/anthropic/v1/messages", Route("anthropic", True)),
        ("POST", "/v1/messages/count_tokens", Route("anthropic", False)),
        ("POST", "/v1/responses", Route("openai_responses", True)),
        ("POST", "/responses/compact", Route("openai_responses", True)),
        ("POST", "/compatible-mode/v1/chat/completions", Route("openai_chat", True)),
        ("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", Route("gemini", True, "gemini-2.5-pro", True)),
        ("POST", "/v1beta/models/g:generateContent", Route("gemini", True, "g")),
        ("POST", "/v1beta/models/g:countTokens", Route("gemini", False, "g")),
        ("GET", "/v1/models", Route(None, False)),
        ("POST", "/v1/files", None),
        ("POST", "/v1/batches", None),
        ("POST", "/v1/fine_tuning/jobs", None),
        ("GET", "/v1/files/abc/content", None),
        ("PUT", "/v1/messages", None),
        # model lists and entries: at the root or under an API version, after any base path
        ("GET", "/v1/models/claude-x", Route(None, False)),
        ("GET", "/v1beta/models", Route(None, False)),
        ("GET", "/v1beta/models/gemini-2.5-pro", Route(None, False)),
        ("GET", "/api/v1/models", Route(None, False)),
        ("GET", "/models", Route(None, False)),
        # other resources that merely hold a /models segment (issue 47): never forwarded
        ("GET", "/v1/files/models/file-abc/content", None),
        ("GET", "/v1/organization/usage/models", None),
        ("GET", "/v1/fine_tuning/jobs/models/ftjob-1", None),
        ("GET", "/v1/models/x/versions", None),
    ],
)
def test_routes(method, path, expected):
    assert route(method, path) == expected


@pytest.mark.parametrize(
    ("protocol", "events", "expected"),
    [
        # Anthropic: input in message_start, cumulative output in message_delta; its
        # input_tokens exclude both cache parts
        (
            "anthropic",
            [
                {
                    "type": "message_start",
                    "message": {
                        "usage": {
                            "input_tokens": 6,
                            "cache_read_input_tokens": 4,
                            "cache_creation_input_tokens": 2,
                            "output_tokens": 1,
                        }
                    },
                },
                {"type": "message_delta", "usage": {"output_tokens": 30}},
            ],
            TokenUsage(12, 30, 4, 2),
        ),  # fmt: skip
        (
            "openai_responses",
            [
                {
                    "type": "response.completed",
                    "response": {
                        "usage": {
                            "input_tokens": 100,
                            "output_tokens": 7,
                            "input_tokens_details": {"cached_tokens": 60},
                        }
                    },
                }
            ],
            TokenUsage(100, 7, 60),
        ),  # fmt: skip
        (
            "openai_chat",
            [
                {"choices": []},
                {
                    "usage": {
                        "prompt_tokens": 50,
                        "completion_tokens": 5,
                        "prompt_tokens_details": {"cached_tokens": 10},
                    }
                },
            ],
            TokenUsage(50, 5, 10),
        ),  # fmt: skip
        # Gemini repeats usageMetadata; the last wins; thoughts are output
        (
            "gemini",
            [
                {"usageMetadata": {"promptTokenCount": 9}},
                {
                    "usageMetadata": {
                        "promptTokenCount": 9,
                        "candidatesTokenCount": 4,
                        "thoughtsTokenCount": 3,
                        "cachedContentTokenCount": 2,
                    }
                },
            ],
            TokenUsage(9, 7, 2),
        ),  # fmt: skip
        # what is not a sane count is no usage: negative, huge, float, bool, string
        (
            "openai_chat",
            [
                {"usage": {"prompt_tokens": -5, "completion_tokens": 10**12}},
                {"usage": {"prompt_tokens": 1.5, "completion_tokens": True}},
                {"usage": {"prompt_tokens": "7"}},
            ],
            None,
        ),  # fmt: skip
        ("anthropic", [{"type": "ping"}, "not an object", None], None),
    ],
)
def test_usage_from_each_protocols_answers(protocol, events, expected):
    reader = UsageReader(protocol)
    for event in events:
        reader.feed(event)
    assert reader.usage() == expected


def test_only_a_streamed_chat_call_without_usage_is_changed():
    assert wants_usage_added(Route("openai_chat", True), {"stream": True})
    assert wants_usage_added(Route("openai_chat", True), {"stream": True, "stream_options": {"include_usage": False}})
    assert not wants_usage_added(
        Route("openai_chat", True), {"stream": True, "stream_options": {"include_usage": True}}
    )
    assert not wants_usage_added(Route("openai_chat", True), {"stream": False})
    assert not wants_usage_added(Route("anthropic", True), {"stream": True})


def test_error_bodies_are_each_protocols_own():
    assert error_body("anthropic", 400, "m") == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "m"},
    }
    assert error_body("openai_responses", 429, "m") == {
        "error": {"message": "m", "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}
    }
    assert error_body("gemini", 429, "m") == {"error": {"code": 429, "message": "m", "status": "RESOURCE_EXHAUSTED"}}
    assert error_body("anthropic", 502, "m")["error"]["type"] == "api_error"


def test_campaign_prices_win_and_the_table_prices_the_rest():
    table = PriceTable({"my-model": ModelPrice(2.0, 10.0, cache_read=0.5)}, "https://api.anthropic.com")
    u = TokenUsage(input_tokens=1000, output_tokens=100, cached_tokens=400)
    assert table.cost("my-model", "anthropic", u).usd == pytest.approx((600 * 2 + 400 * 0.5 + 100 * 10) / 1e6)
    assert table.cost("provider/my-model", "openai_chat", u).source == "campaign"
    real = table.cost("claude-sonnet-4-5", "anthropic", u)
    want = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1000, cache_read_tokens=400, cache_write_tokens=0, output_tokens=100),
        "claude-sonnet-4-5",
        provider_id="anthropic",
    )
    assert real.usd == pytest.approx(float(want.total_price)) and real.source.startswith("genai-prices ")
    assert table.cost("no-such-model-anywhere", "anthropic", u).usd is None
    assert not table.known("no-such-model-anywhere", "anthropic") and table.known("my-model", "anthropic")


@pytest.mark.parametrize(
    ("limits", "calls", "reached"),
    [
        (Limits(), 5, None),
        (Limits(tokens=300), 2, None),  # 2 x 110 tokens
        (Limits(tokens=300), 3, "tokens 330 of 300"),
        (Limits(requests=3), 3, "requests 3 of 3"),
        (Limits(usd=0.05), 4, None),
        (Limits(usd=0.05), 5, "cost $0.0500 of $0.05"),
    ],
)
def test_the_meter_says_which_limit_is_reached(limits, calls, reached):
    meter = Meter(limits)
    for _ in range(calls):
        meter.add(200, 10.0, TokenUsage(100, 10), 0.01)
    assert meter.exhausted() == reached


UNREADABLE_TOKENS = "usage unreadable: 1 answer without readable usage, which the tokens limit cannot count"


@pytest.mark.parametrize(
    ("limits", "answers", "reached"),
    [
        (Limits(tokens=10**6), [(200, None, True)], UNREADABLE_TOKENS),
        (Limits(tokens=10**6), [(200, TokenUsage(5, 0), False)], UNREADABLE_TOKENS),  # part of its usage
        (Limits(tokens=10**6), [(204, None, True)], UNREADABLE_TOKENS),  # any success
        (
            Limits(usd=1.0, tokens=10**6),
            [(200, None, True), (200, TokenUsage(5, 5), True), (201, None, True)],
            "usage unreadable: 2 answers without readable usage, which the tokens and USD limit cannot count",
        ),
        (Limits(tokens=10**6), [(500, None, True), (400, None, True), (0, None, True)], None),  # failures bill nothing
        (Limits(requests=3), [(200, None, True)], None),  # a request count counts it like any other
        (Limits(), [(200, None, True)], None),
    ],
)
def test_under_a_token_or_usd_limit_an_answer_without_readable_usage_exhausts_the_budget(limits, answers, reached):
    meter = Meter(limits)
    for status, usage, readable in answers:
        meter.add(status, 1.0, usage, 0.0 if usage else None, readable)
    assert meter.exhausted() == reached
    unmetered = sum(200 <= s < 300 and (u is None or not r) for s, u, r in answers)
    assert meter.summary()["unmetered_answers"] == unmetered
    assert (meter.summary()["cost_usd"] is None) == (unmetered > 0)  # never a partial sum


@pytest.mark.parametrize(
    ("protocol", "events", "why"),
    [
        ("anthropic", [{"type": "message_start", "message": {"usage": {"input_tokens": 5}}}],
         "the answer's usage states no output_tokens"),
        ("openai_responses", [{"type": "response.completed", "response": {"usage": None}}],
         "the answer states no usage"),
        ("openai_chat", [{"usage": {"prompt_tokens": 5, "completion_tokens": -1}}],
         "the answer's usage states no output_tokens"),
        ("openai_chat", [{"usage": {"prompt_tokens": 10**12, "completion_tokens": 1}}],
         "the answer's usage states no input_tokens"),
        ("openai_chat", [{"choices": []}], "the answer states no usage"),
        # Gemini leaves out a zero count: a prompt count alone is its whole usage
        ("gemini", [{"usageMetadata": {"promptTokenCount": 9}}], None),
        ("gemini", [{"usageMetadata": {"candidatesTokenCount": 9}}], "the answer's usage states no input_tokens"),
        # Gemini's stream without alt=sse: a JSON array of responses
        ("gemini", [[{"usageMetadata": {"promptTokenCount": 9}}, {"usageMetadata": {"candidatesTokenCount": 4,
                                                                                  "promptTokenCount": 9}}]], None),
        ("anthropic", [{"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}}], None),
    ],
)  # fmt: skip
def test_which_answers_usage_is_readable(protocol, events, why):
    reader = UsageReader(protocol)
    for event in events:
        reader.feed(event)
    assert reader.unreadable() == why


def test_the_meter_counts_failures_at_the_end_and_answers_without_usage():
    meter = Meter()
    for status in (500, 200, 503, 0, 429):
        meter.add(status, 1.0, None, None)
    s = meter.summary()
    assert (s["provider_failure_streak"], s["http_errors"], s["unmetered_answers"]) == (3, 4, 1)
    assert s["statuses"] == {"0": 1, "200": 1, "429": 1, "500": 1, "503": 1}
    meter.add(400, 1.0, None, None)  # the agent's own bad request ends the streak
    assert meter.summary()["provider_failure_streak"] == 0
    assert latency_summary([float(i) for i in range(1, 101)]) == {"p50": 50.0, "p99": 99.0, "max": 100.0}


def test_a_cut_never_leaves_part_of_a_secret():
    secret = "sk-" + "Zq9" * 15
    redact = Redactor({"K": secret})
    margin = max(len(n) for n, _ in redact.pairs) + 64
    for at, size in itertools.product(range(0, 700, 7), (1, 97, 5000)):  # every place, any chunking
        body = CappedBody(limit=512, margin=margin)
        data = ("a" * at + secret + "b" * 900).encode()
        for i in range(0, len(data), size):  # in chunks, as a stream comes
            body.add(data[i : i + size])
        rec = body.record(redact)
        assert rec["bytes"] == len(data) and rec["cut"] == len(data) - 512
        kept = rec["body"]
        assert all(secret[i : i + 8] not in kept for i in range(len(secret) - 7)), (at, size)
        assert len(kept.encode()) <= 512 + 100
        assert kept.endswith("b" * (512 - 256 - len(secret))), (at, size)  # the tail kept is the body's end


def test_a_body_under_the_cap_is_kept_whole():
    body = CappedBody(limit=1000, margin=100)
    body.add(b"x" * 600)
    body.add(b"y" * 400)
    assert body.record(Redactor({})) == {"bytes": 1000, "body": "x" * 600 + "y" * 400, "cut": 0}


def stream_usage(stream: bytes, size: int, head: int | None = None, tail: int | None = None) -> list:
    from ptb_harness.gateway.server import SseUsage

    events = SseUsage(head or SseUsage.HEAD, tail or SseUsage.TAIL)
    for i in range(0, len(stream), size):
        events.add(stream[i : i + size])
    return events.events()


def test_stream_events_are_found_across_any_chunking():
    stream = (
        b'event: message_start\r\ndata: {"usage": {"input_tokens": 3}}\r\n\r\n'
        + b'event: ping\ndata: {"type": "ping"}\n\n' * 3
        + b'data: {"usage": {"output_tokens": 9}}\n\ndata: [DONE]\n\n'
        + b'data: {"usage": {"output_tokens": 99}}'  # never ended: no event
    )
    for size in (1, 2, 3, 7, 64, len(stream)):
        found = stream_usage(stream, size)
        assert found == [{"usage": {"input_tokens": 3}}, {"usage": {"output_tokens": 9}}], size
        # the same with a head and a tail smaller than the stream: its middle is left out
        assert stream_usage(stream, size, head=80, tail=120) == found, size


def test_a_stream_past_head_and_tail_keeps_its_first_and_last_usage_and_leaves_out_its_middle():
    start = b'event: message_start\ndata: {"message": {"usage": {"input_tokens": 5}}}\n\n'
    middle = b'event: content_block_delta\ndata: {"delta": {"text": "' + b"x" * 300 + b'"}}\n\n'
    middle_usage = b'data: {"usage": {"output_tokens": 1}}\n\n'
    end = b'event: message_delta\ndata: {"usage": {"output_tokens": 7}}\n\n'
    stream = start + middle * 20 + middle_usage + middle * 20 + end
    for size in (1, 5, 100, 333, len(stream)):
        found = stream_usage(stream, size, head=200, tail=400)
        assert found[0] == {"message": {"usage": {"input_tokens": 5}}} and found[-1] == {"usage": {"output_tokens": 7}}
        # what is kept is bounded (a chunk is kept whole: one bigger than the tail may keep more)
        assert len(found) == (2 if size <= 333 else 3), size
        assert len(stream_usage(stream, size)) == 3  # the defaults (64 KiB, 4 MiB) read it whole


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_the_last_two_events_are_read_whole_whatever_their_size(newline):
    """A last usage event far bigger than the kept tail (Responses' response.completed
    repeats the agent's instructions), with a small event after it, is read whole."""

    def event(name: str, data: dict) -> bytes:
        return b"event: " + name.encode() + newline + b"data: " + json.dumps(data).encode() + newline * 2

    start = event("message_start", {"message": {"usage": {"input_tokens": 5}}})
    middle = event("content_block_delta", {"delta": {"text": "x" * 300}})
    huge = event("response.completed", {"echo": "y" * 3000, "usage": {"output_tokens": 4242}})
    stream = start + middle * 30 + huge + event("ping", {}) + b"data: [DON"  # never ended
    for size in (1, 2, 7, 100, 999, len(stream)):
        found = stream_usage(stream, size, head=200, tail=400)
        assert found[0] == {"message": {"usage": {"input_tokens": 5}}}, size
        assert found[-1]["usage"] == {"output_tokens": 4242}, size
