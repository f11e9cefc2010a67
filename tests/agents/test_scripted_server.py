"""The scripted model server (a test stand-in) itself: steps chosen from the request,
side calls for other models, every request recorded. Plain HTTP, no CLI."""

from __future__ import annotations

import http.client
import json

from scripted_server import SIDE_ANSWER, Plan, ScriptedServer

PLAN = [
    {
        "shell": "cp -r $MODEL_TO_TRAIN final_model",
        "usage": {"input_tokens": 10, "output_tokens": 2, "cached_tokens": 4},
    },
    {"text": "done", "usage": {"input_tokens": 20, "output_tokens": 3, "cached_tokens": 5}},
]


def post(server: ScriptedServer, path: str, body: dict, headers: dict | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    return resp.status, resp.read().decode()


def sse_events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_anthropic_steps_follow_the_conversation_and_side_calls_get_plain_text():
    plan = Plan("m-main", PLAN)
    with ScriptedServer(plan, ["anthropic"]) as server:
        first = {"model": "m-main", "stream": True, "messages": [{"role": "user", "content": "go"}]}
        status, text = post(server, "/v1/messages?beta=true", first, {"x-api-key": "k1"})
        assert status == 200
        events = sse_events(text)
        assert [e["type"] for e in events] == [
            "message_start", "content_block_start", "content_block_delta", "content_block_stop",
            "message_delta", "message_stop",
        ]  # fmt: skip
        assert events[1]["content_block"]["type"] == "tool_use"
        assert json.loads(events[2]["delta"]["partial_json"]) == {"command": PLAN[0]["shell"]}
        assert events[4]["usage"] == {
            "input_tokens": 6, "cache_read_input_tokens": 4, "cache_creation_input_tokens": 0, "output_tokens": 2,
        }  # fmt: skip
        # a retry of the same request gets the same step (stateless)
        assert sse_events(post(server, "/v1/messages", first)[1])[1]["content_block"]["type"] == "tool_use"
        second = {**first, "messages": [*first["messages"], {"role": "assistant", "content": []}]}
        events = sse_events(post(server, "/v1/messages", second)[1])
        assert events[2]["delta"] == {"type": "text_delta", "text": "done"}
        side = sse_events(post(server, "/v1/messages", {**first, "model": "small-fast"})[1])
        assert side[2]["delta"]["text"] == SIDE_ANSWER
        status, _ = post(server, "/v1/elsewhere", {})
        assert status == 404
    paths = [r.path for r in server.recorded()]
    assert paths == ["/v1/messages?beta=true", "/v1/messages", "/v1/messages", "/v1/messages", "/v1/elsewhere"]
    assert server.recorded()[0].headers["x-api-key"] == "k1"
    assert plan.total_sent() == {"input_tokens": 40, "output_tokens": 7, "cached_tokens": 13}
