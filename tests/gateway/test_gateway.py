"""The real gateway process in front of the scripted model server (a test stand-in for the
providers): answers pass unchanged (streams included) for the four protocols, the key is
swapped in for the token, usage is metered from the answers, the budget refuses in each
protocol's own shape, llm_log.jsonl is sanitized and capped."""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
import types

import pytest
from gateway_env import Plan, gateway_before, request, usage
from protocols import openai_chat
from scripted_server import SSE_HEADERS, Response, sse

from ptb_harness.gateway.meter import Limits
from ptb_harness.gateway.prices import ModelPrice
from ptb_harness.gateway.server import BUDGET_STATUS, SseUsage
from ptb_harness.runtime.procs import ProcessResult
from ptb_harness.stages.llm_gateway import provider_failure

MODEL = "m-main"
STEPS = [{"shell": "ls", **usage(1200, 40, 300)}, {"text": "done", **usage(1500, 9, 1000)}]
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def call(protocol: str, stream: bool, turns: int = 0) -> tuple[str, dict, str]:
    """(path, body, auth header) of a model call with ``turns`` model turns before it."""
    if protocol == "anthropic":
        msgs = [{"role": "user", "content": "go"}] + [{"role": "assistant", "content": "x"}] * turns
        return "/v1/messages?beta=true", {"model": MODEL, "stream": stream, "messages": msgs}, "x-api-key"
    if protocol == "openai_responses":
        items = [{"role": "assistant", "content": "x"}] * turns
        return "/v1/responses", {"model": MODEL, "stream": stream, "input": items}, "authorization"
    if protocol == "openai_chat":
        msgs = [{"role": "assistant", "content": "x"}] * turns
        body = {"model": MODEL, "stream": stream, "tools": TOOLS, "messages": msgs}
        if stream:
            body["stream_options"] = {"include_usage": True}
        return "/v1/chat/completions", body, "authorization"
    verb = "streamGenerateContent?alt=sse" if stream else "generateContent"
    body = {"contents": [{"role": "model", "parts": [{"text": "x"}]}] * turns}
    return f"/v1beta/models/{MODEL}:{verb}", body, "x-goog-api-key"


def auth(header: str, token: str) -> dict[str, str]:
    return {header: f"Bearer {token}" if header == "authorization" else token}


def direct(server, path: str, body: dict) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    resp = conn.getresponse()
    return resp.status, resp.read()


def normal(data: bytes) -> bytes:
    """The answer without what differs between two calls (the stand-in's ids, times)."""
    return re.sub(rb'standin-?\d+|"created":\s*\d+', b"ID", data)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("protocol", ["anthropic", "openai_responses", "openai_chat", "gemini"])
def test_answers_pass_unchanged_and_the_meter_reads_their_usage(tmp_path, protocol, stream):
    plan = Plan(MODEL, STEPS)
    with gateway_before(tmp_path, plan, protocol, prices={MODEL: ModelPrice(3.0, 15.0, 0.3)}) as gw:
        answers = []
        for turns in (0, 1):
            path, body, header = call(protocol, stream, turns)
            status, data = gw.post(path, body, auth(header, gw.token))
            assert status == 200, data
            answers.append((path, body, data))
        summary = gw.gateway.stop()
        sent = plan.total_sent()  # what the stand-in told the gateway
        for path, body, data in answers:  # the same call straight to the stand-in
            assert normal(data) == normal(direct(gw.server, path, body)[1])
    assert summary is not None
    assert {k: summary[k] for k in sent} == sent
    assert (summary["requests"], summary["source"], summary["http_errors"]) == (2, "gateway", 0)
    # the campaign's price: uncached input 3, cache reads 0.3, output 15 (USD per million)
    uncached = sent["input_tokens"] - sent["cached_tokens"]
    billed = (uncached * 3.0 + sent["cached_tokens"] * 0.3 + sent["output_tokens"] * 15.0) / 1e6
    assert summary["cost_usd"] == pytest.approx(billed)
    # the key reached the provider in the auth header the token came in, the token never
    header = call(protocol, stream)[2]
    for r in gw.server.recorded()[:2]:
        assert r.headers[header] == (f"Bearer {gw.key}" if header == "authorization" else gw.key)
        assert gw.token not in json.dumps(r.headers) and gw.token.encode() not in r.body
    lines = gw.log()
    assert [(ln["n"], ln["status"], ln["model"], ln["stream"], ln["refused"]) for ln in lines] == [
        (1, 200, MODEL, stream, None),
        (2, 200, MODEL, stream, None),
    ]
    assert lines[-1]["totals"]["input_tokens"] == sent["input_tokens"]
    assert all(ln["price_source"] == "campaign" and ln["latency_ms"] > 0 for ln in lines)


def test_a_streamed_chat_call_is_asked_for_its_usage(tmp_path):
    plan = Plan(MODEL, STEPS)
    with gateway_before(tmp_path, plan, "openai_chat") as gw:
        body = {"model": MODEL, "stream": True, "tools": TOOLS, "messages": []}
        status, data = gw.post("/v1/chat/completions", body, auth("authorization", gw.token))
        assert status == 200 and b"data: [DONE]" in data
        summary = gw.gateway.stop()
    (req,) = gw.server.recorded()
    assert json.loads(req.body)["stream_options"] == {"include_usage": True}
    assert summary["input_tokens"] == 1200 and summary["unpriced_answers"] == 1  # no price for m-main


@pytest.mark.parametrize(
    ("protocol", "shape"),
    [
        ("anthropic", {"type": "error", "error": {"type": "authentication_error"}}),
        ("openai_chat", {"error": {"type": "invalid_request_error"}}),
        ("gemini", {"error": {"code": 401, "status": "UNAUTHENTICATED"}}),
    ],
)
def test_a_wrong_token_gets_401_in_the_protocols_shape_and_reaches_nobody(tmp_path, protocol, shape):
    with gateway_before(tmp_path, Plan(MODEL, STEPS), protocol) as gw:
        path, body, header = call(protocol, True)
        for headers in ({}, auth(header, "ptbgw-wrong"), auth(header, gw.token[:-1]), {"x-other": gw.token}):
            status, data = gw.post(path, body, headers)
            assert status == 401
            answer = json.loads(data)
            for k, v in shape.items():
                assert {kk: answer[k][kk] for kk in v} == v if isinstance(v, dict) else answer[k] == v
        # Gemini's ?key= form of the token passes, and reaches the provider as its header
        status, _ = gw.post(f"/v1beta/models/{MODEL}:generateContent?key={gw.token}", {"contents": []})
        assert status == 200
    (req,) = gw.server.recorded()
    assert req.path == f"/v1beta/models/{MODEL}:generateContent" and req.headers["x-goog-api-key"] == gw.key
    assert [ln["refused"] for ln in gw.log()] == ["token"] * 4 + [None]


def test_only_model_calls_pass(tmp_path):
    with gateway_before(tmp_path, Plan(MODEL, STEPS), "openai_chat") as gw:
        bearer = auth("authorization", gw.token)
        for method, path in [("POST", "/v1/files"), ("POST", "/v1/fine_tuning/jobs"), ("DELETE", "/v1/models/x"),
                             ("POST", "/v1/x/../chat/completions"), ("POST", "/v1/%2e%2e/responses"),
                             # a /models segment inside another resource (issue 47)
                             ("GET", "/v1/files/models/file-abc/content"), ("GET", "/v1/organization/usage/models"),
                             ("GET", "/v1/fine_tuning/jobs/models/ftjob-1")]:  # fmt: skip
            status, data = request(gw.gateway, method, path, {}, bearer)
            assert status == 404, path
            assert "is not a model call" in json.loads(data)["error"]["message"]
        assert request(gw.gateway, "GET", "/v1/models", None, bearer)[0] == 404  # forwarded: the stand-in has none
    assert [r.path for r in gw.server.recorded()] == ["/v1/models"]


@pytest.mark.parametrize(
    ("limits", "allowed", "reason"),
    [
        (Limits(tokens=2500), 2, "tokens 2749 of 2500"),  # 1240 after one call, 2749 after two
        (Limits(requests=1), 1, "requests 1 of 1"),
        (Limits(usd=0.004), 1, "cost $0.0042 of $0.004"),  # 1200 in, 40 out at 3 / 15 per million
    ],
    ids=["tokens", "requests", "usd"],
)
def test_the_budget_refuses_the_call_after_its_limit(tmp_path, limits, allowed, reason):
    plan = Plan(MODEL, STEPS * 3)
    prices = {MODEL: ModelPrice(3.0, 15.0)}
    with gateway_before(tmp_path, plan, "anthropic", limits=limits, prices=prices) as gw:
        statuses = []
        for turns in range(4):
            path, body, header = call("anthropic", True, turns)
            status, data = gw.post(path, body, auth(header, gw.token))
            statuses.append(status)
            # the refusal is said to the harness before the agent hears it: once synced,
            # the harness knows (no wait: an agent may exit the moment it is refused)
            assert gw.gateway.sync()
            assert gw.gateway.exhausted.is_set() is (status == 400)
        summary = gw.gateway.stop()
    assert statuses == [200] * allowed + [400] * (4 - allowed)
    answer = json.loads(data)
    assert answer["error"]["type"] == "invalid_request_error"
    assert answer["error"]["message"] == (
        f"ptb-harness gateway: this cell's LLM budget is exhausted ({reason}); the session is over"
    )
    assert gw.gateway.exhausted_reason == reason and summary["exhausted"] == reason
    assert len(gw.server.recorded()) == allowed  # nothing past the limit reached the provider
    assert summary["refused"] == {"llm_budget": 4 - allowed}


def test_a_usd_budget_refuses_a_model_without_a_price(tmp_path):
    with gateway_before(tmp_path, Plan(MODEL, STEPS), "openai_chat", limits=Limits(usd=1.0)) as gw:
        status, data = gw.post("/v1/chat/completions", {"model": "no-such-model", "messages": []},
                               auth("authorization", gw.token))  # fmt: skip
    assert status == 400 and "has no price" in json.loads(data)["error"]["message"]
    assert gw.server.recorded() == []


def test_provider_failures_pass_through_and_are_counted(tmp_path):
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))  # a port nobody listens on
    port = dead.getsockname()[1]
    dead.close()
    with gateway_before(tmp_path, Plan(MODEL, STEPS), "anthropic", upstream=f"http://127.0.0.1:{port}") as gw:
        path, body, header = call("anthropic", True)
        status, data = gw.post(path, body, auth(header, gw.token))
        summary = gw.gateway.stop()
    assert status == 502 and json.loads(data)["error"]["type"] == "api_error"
    assert summary["statuses"] == {"0": 1} and summary["provider_failure_streak"] == 1
    assert gw.log()[0]["error"].startswith("the provider could not be reached")


def test_a_provider_failing_with_5xx_is_passed_on_and_ends_the_session_as_the_infrastructures(tmp_path):
    """The provider answers 503 to every call (what a CLI retries, then gives up on): each
    answer passes to the agent unchanged, nothing is billed, and the session's end is the
    provider's failure (the solve stage's rule, applied to this gateway's summary)."""
    with gateway_before(tmp_path, Plan(MODEL, [{"fail": 503}]), "openai_responses") as gw:
        path, body, header = call("openai_responses", True)
        answers = [gw.post(path, body, auth(header, gw.token)) for _ in range(3)]
        summary = gw.gateway.stop()
    assert {status for status, _ in answers} == {503}
    assert json.loads(answers[0][1])["error"]["message"] == "stand-in: the provider failed (HTTP 503)"
    assert len(gw.server.recorded()) == 3 and gw.server.plan.sent_usage == []
    assert (summary["statuses"], summary["provider_failure_streak"], summary["cost_usd"]) == ({"503": 3}, 3, 0.0)
    assert summary["unmetered_answers"] == 0  # a failure bills nothing: no usage is no unreadable usage
    why = provider_failure(summary, ProcessResult("exited", 1, None, 0.0, 1.0))
    assert why == "the LLM provider failed the last 3 model call(s) of the session (HTTP statuses 503: 3)"


def test_the_log_is_sanitized_and_capped(tmp_path):
    hf = "hf_" + "s3cr3t" * 8
    with gateway_before(tmp_path, Plan(MODEL, STEPS), "anthropic", secrets={"HF_TOKEN": hf}, max_body_bytes=4096) as gw:
        path, body, header = call("anthropic", False)
        # the agent put a secret into its conversation: in the kept head, in the part cut
        # out, in the kept tail (a secret across a cut: test_gateway_units.py)
        filler = "x" * 3000
        body["messages"][0]["content"] = f"{hf} {filler}{hf}{filler} {hf}"
        assert gw.post(path, body, auth(header, gw.token))[0] == 200
    text = gw.log_path.read_text()
    for part in (hf, hf[:12], hf[-12:], gw.key, gw.token):
        assert part not in text
    (line,) = gw.log()
    assert line["request"]["bytes"] > 4096 and line["request"]["cut"] > 0
    assert line["request"]["body"].count("[REDACTED:HF_TOKEN]") == 2
    assert "bytes cut ...]" in line["request"]["body"] and line["response"]["cut"] == 0


def test_a_unix_socket_with_a_long_path(tmp_path):
    deep = tmp_path / ("d" * 100) / "harness"
    deep.mkdir(parents=True)
    sock = deep / "llm.sock"
    assert len(str(sock)) > 108  # longer than a Unix socket address may be
    with gateway_before(tmp_path, Plan(MODEL, STEPS), "anthropic", socket_path=sock) as gw:
        assert gw.gateway.port is None and gw.gateway.ready["socket"] == str(sock)
        path, body, header = call("anthropic", True)
        assert gw.post(path, body, auth(header, gw.token))[0] == 200
        assert oct(sock.stat().st_mode & 0o777) == "0o600"


def slow_stream_protocol(go: threading.Event, final_event: bytes) -> types.ModuleType:
    """A stand-in Anthropic stream: message_start (100 input tokens), then, once ``go`` is
    set, ``final_event`` (its usage) and message_stop."""

    def respond(_request, _plan):
        def body():
            yield sse("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 100}}})
            go.wait(60)
            yield final_event + sse("message_stop", {"type": "message_stop"})

        return Response(200, dict(SSE_HEADERS), body())

    mod = types.ModuleType("slow_stream")
    mod.matches = lambda method, path: path == "/v1/messages"  # type: ignore[attr-defined]
    mod.respond = respond  # type: ignore[attr-defined]
    return mod


def wait_for_log_lines(gw, n: int) -> list[dict]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if gw.log_path.exists() and len(gw.log_path.read_text().splitlines()) >= n:
            return gw.log()
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} lines in llm_log.jsonl after 60 s")


def raw_stream_request(gw) -> socket.socket:
    """An agent's streamed Anthropic request sent on a bare socket (which the test can close
    at the moment it chooses), the connection left open."""
    path, body, header = call("anthropic", True)
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
    head += f"{header}: {auth(header, gw.token)[header]}\r\ncontent-length: {len(data)}\r\n\r\n"
    agent = socket.create_connection(("127.0.0.1", gw.gateway.port), timeout=30)
    agent.sendall(head.encode() + data)
    return agent


def test_an_answer_the_agent_stops_reading_is_read_to_its_end_and_metered(tmp_path):
    """Closing the stream early is no way to a call without a cost: the provider bills the
    whole answer, so the gateway reads it to its end (else: 100 tokens, the start's)."""
    go = threading.Event()
    final = sse("message_delta", {"type": "message_delta", "usage": {"output_tokens": 777}})
    with gateway_before(tmp_path, Plan(MODEL, STEPS), "anthropic") as gw:
        gw.server.protocols.insert(0, slow_stream_protocol(go, final))
        agent = raw_stream_request(gw)
        got = b""
        while b"message_start" not in got:
            got += agent.recv(4096)
        agent.close()  # the agent goes away mid-stream
        go.set()
        (line,) = wait_for_log_lines(gw, 1)
        summary = gw.gateway.stop()
    assert line["error"] == "the agent closed the stream before its end"
    assert line["usage"]["output_tokens"] == 777 and summary["output_tokens"] == 777
    assert summary["input_tokens"] == 100 and summary["unmetered_answers"] == 0


def late_headers_protocol(go: threading.Event) -> types.ModuleType:
    """A stand-in Anthropic stream whose headers come once ``go`` is set."""

    def respond(_request, _plan):
        go.wait(60)
        usage_events = [
            sse("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 100}}}),
            sse("message_delta", {"type": "message_delta", "usage": {"output_tokens": 7}}),
            sse("message_stop", {"type": "message_stop"}),
        ]
        return Response(200, dict(SSE_HEADERS), iter(usage_events))

    mod = types.ModuleType("late_headers")
    mod.matches = lambda method, path: path == "/v1/messages"  # type: ignore[attr-defined]
    mod.respond = respond  # type: ignore[attr-defined]
    return mod


def test_an_agent_gone_before_the_answer_is_no_provider_failure(tmp_path):
    """The agent closes its connection before the provider's headers (Codex closes a stream
    once it has what it needs): writing the answer toward it fails, which is the agent's
    doing: the call keeps the provider's status and is metered in full, and the session's
    provider-failure streak stays 0 (it was taken for 'the provider could not be reached',
    status 0, and three in a row failed a real Codex cell's solve)."""
    go = threading.Event()
    with gateway_before(tmp_path, Plan(MODEL, STEPS), "anthropic") as gw:
        gw.server.protocols.insert(0, late_headers_protocol(go))
        agent = raw_stream_request(gw)
        while not gw.server.recorded():  # the request reached the provider
            time.sleep(0.02)
        agent.close()  # the agent goes away before any answer
        time.sleep(0.3)  # (had the gateway not seen it yet, its next write fails instead)
        go.set()
        (line,) = wait_for_log_lines(gw, 1)
        summary = gw.gateway.stop()
    assert (line["status"], line["error"]) == (200, "the agent closed the stream before its end")
    assert line["usage"]["output_tokens"] == 7 and summary["input_tokens"] == 100
    assert summary["statuses"] == {"200": 1} and summary["provider_failure_streak"] == 0


def test_a_last_event_bigger_than_the_kept_tail_is_read_whole(tmp_path):
    """Responses' response.completed repeats the request's instructions (as big as the agent
    makes them): its usage, at its very end, is read whatever its size."""
    go = threading.Event()
    go.set()
    huge = {"type": "message_delta", "echo": "x" * (3 * SseUsage.TAIL), "usage": {"output_tokens": 4242}}
    with gateway_before(tmp_path, Plan(MODEL, STEPS), "anthropic") as gw:
        gw.server.protocols.insert(0, slow_stream_protocol(go, sse("message_delta", huge)))
        path, body, header = call("anthropic", True)
        status, data = gw.post(path, body, auth(header, gw.token))
        summary = gw.gateway.stop()
    assert status == 200 and len(data) > 3 * SseUsage.TAIL
    assert (summary["input_tokens"], summary["output_tokens"]) == (100, 4242)


# -- metering fails closed ----------------------------------------------------------------
_USAGE_KEYS = frozenset({"usage", "usageMetadata"})


def _strip_usage(obj):
    if isinstance(obj, dict):
        return {k: _strip_usage(v) for k, v in obj.items() if k not in _USAGE_KEYS}
    if isinstance(obj, list):
        return [_strip_usage(v) for v in obj]
    return obj


def _strip_event(chunk: bytes) -> bytes:
    lines = []
    for line in chunk.split(b"\n"):
        if line.startswith(b"data: ") and line[6:7] in (b"{", b"["):
            line = b"data: " + json.dumps(_strip_usage(json.loads(line[6:]))).encode()
        lines.append(line)
    return b"\n".join(lines)


def without_usage(proto: types.ModuleType) -> types.ModuleType:
    """A stand-in protocol answering as ``proto`` does with every usage object removed (in
    a JSON answer and in each event of a stream): a provider made to answer without usage."""

    def respond(request, plan):
        answer = proto.respond(request, plan)
        if isinstance(answer.body, bytes | bytearray):
            body = json.dumps(_strip_usage(json.loads(answer.body))).encode()
        else:
            body = (_strip_event(chunk) for chunk in answer.body)
        return Response(answer.status, answer.headers, body)

    mod = types.ModuleType(f"{proto.__name__}_without_usage")
    mod.matches = proto.matches  # type: ignore[attr-defined]
    mod.respond = respond  # type: ignore[attr-defined]
    return mod


def serve_without_usage(gw) -> None:
    gw.server.protocols[:] = [without_usage(p) for p in gw.server.protocols]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("protocol", ["anthropic", "openai_responses", "openai_chat", "gemini"])
def test_under_a_token_limit_an_answer_without_usage_ends_the_session(tmp_path, protocol, stream):
    """The answer whose usage was removed passes (the provider made it); the next model
    call is refused at the budget ("usage unreadable"), reaches nobody, and the session's
    cost is unknown, never the sum of what could be read."""
    with gateway_before(tmp_path, Plan(MODEL, STEPS), protocol, limits=Limits(tokens=10**6)) as gw:
        serve_without_usage(gw)
        answers = [
            gw.post(*call(protocol, stream, turns)[:2], auth(call(protocol, stream)[2], gw.token)) for turns in (0, 1)
        ]
        assert gw.gateway.exhausted.wait(10)
        summary = gw.gateway.stop()
    reason = "usage unreadable: 1 answer without readable usage, which the tokens limit cannot count"
    assert [status for status, _ in answers] == [200, BUDGET_STATUS[protocol]]
    assert b'"usage' not in answers[0][1]  # the stand-in's answer stated none
    message = json.loads(answers[1][1])["error"]["message"]
    assert message == f"ptb-harness gateway: this cell's LLM budget is exhausted ({reason}); the session is over"
    assert gw.gateway.exhausted_reason == reason and summary["exhausted"] == reason
    assert (summary["requests"], summary["unmetered_answers"], summary["cost_usd"]) == (1, 1, None)
    assert (summary["input_tokens"], summary["refused"]) == (0, {"llm_budget": 1})
    assert len(gw.server.recorded()) == 1  # the refused call reached nobody
    first, refused = gw.log()
    assert (first["status"], first["usage"], first["usage_unreadable"]) == (200, None, "the answer states no usage")
    assert first["totals"]["unmetered_answers"] == 1 and first["totals"]["cost_usd"] is None
    assert (refused["refused"], refused["usage_unreadable"]) == ("llm_budget", None)


def test_under_a_usd_limit_an_answer_with_part_of_its_usage_ends_the_session(tmp_path):
    """An answer stating its input but no output (a count removed, or not a sane count) is
    no usage either: its tokens are recorded, the session ends."""

    def respond(request, plan):
        answer = openai_chat.respond(request, plan)
        body = json.loads(answer.body)
        body["usage"]["completion_tokens"] = -1
        return Response(answer.status, answer.headers, json.dumps(body).encode())

    prices = {MODEL: ModelPrice(3.0, 15.0)}
    with gateway_before(tmp_path, Plan(MODEL, STEPS), "openai_chat", limits=Limits(usd=5.0), prices=prices) as gw:
        gw.server.protocols.insert(0, types.SimpleNamespace(matches=openai_chat.matches, respond=respond))
        statuses = [
            gw.post(*call("openai_chat", False, turns)[:2], auth("authorization", gw.token))[0] for turns in (0, 1)
        ]
        summary = gw.gateway.stop()
    assert statuses == [200, 429]
    assert summary["exhausted"] == "usage unreadable: 1 answer without readable usage, which the USD limit cannot count"
    (first, _) = gw.log()
    assert first["usage_unreadable"] == "the answer's usage states no output_tokens"
    assert first["usage"]["input_tokens"] == 1200 and summary["input_tokens"] == 1200 and summary["cost_usd"] is None


@pytest.mark.parametrize("limits", [Limits(), Limits(requests=5)], ids=["no-limit", "requests"])
def test_without_a_token_or_usd_limit_answers_without_usage_pass_and_are_counted(tmp_path, limits):
    with gateway_before(tmp_path, Plan(MODEL, STEPS), "anthropic", limits=limits) as gw:
        serve_without_usage(gw)
        statuses = [gw.post(*call("anthropic", True, turns)[:2], auth("x-api-key", gw.token))[0] for turns in (0, 1, 2)]
        summary = gw.gateway.stop()
    assert statuses == [200] * 3
    assert (summary["requests"], summary["unmetered_answers"], summary["exhausted"]) == (3, 3, None)
    assert summary["cost_usd"] is None and summary["refused"] == {}


def test_a_gemini_stream_without_sse_is_metered(tmp_path):
    """streamGenerateContent without alt=sse answers a JSON array of responses, not SSE:
    its usage is read from the array (a stream's shape is no way around the meter)."""
    plan = Plan(MODEL, STEPS)
    with gateway_before(tmp_path, plan, "gemini", limits=Limits(tokens=10**6)) as gw:
        body = {"contents": []}
        status, data = gw.post(f"/v1beta/models/{MODEL}:streamGenerateContent", body, auth("x-goog-api-key", gw.token))
        summary = gw.gateway.stop()
    assert status == 200 and isinstance(json.loads(data), list)
    assert (summary["input_tokens"], summary["output_tokens"]) == (1200, 40)
    assert (summary["unmetered_answers"], summary["exhausted"]) == (0, None)
