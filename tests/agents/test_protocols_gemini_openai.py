"""The Gemini and OpenAI Chat Completions plug-ins of the scripted model server (a test
stand-in): the wire shapes Gemini CLI, Qwen Code and OpenCode accept, steps chosen from
the conversation, side calls. Plain HTTP, no CLI."""

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


def post(server: ScriptedServer, path: str, body: dict) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    resp = conn.getresponse()
    return resp.status, resp.read().decode()


def sse_data(text: str) -> list:
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


GEMINI_TOOLS = [{"functionDeclarations": [{"name": "read_file"}, {"name": "run_shell_command"}]}]


def test_gemini_function_call_then_text_and_router_side_call():
    plan = Plan("gemini-2.5-pro", PLAN)
    with ScriptedServer(plan, ["gemini"]) as server:
        first = {"contents": [{"role": "user", "parts": [{"text": "go"}]}], "tools": GEMINI_TOOLS}
        status, text = post(server, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", first)
        assert status == 200
        (chunk,) = [json.loads(d) for d in sse_data(text)]
        cand = chunk["candidates"][0]
        assert cand["content"]["parts"] == [
            {"functionCall": {"name": "run_shell_command", "args": {"command": PLAN[0]["shell"]}}}
        ]
        assert cand["finishReason"] == "STOP"
        assert chunk["usageMetadata"] == {
            "promptTokenCount": 10, "candidatesTokenCount": 2, "cachedContentTokenCount": 4, "totalTokenCount": 12,
        }  # fmt: skip
        call = {"role": "model", "parts": cand["content"]["parts"]}
        result = {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {}}}]}
        second = {**first, "contents": [*first["contents"], call, result]}
        _, text = post(server, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", second)
        assert json.loads(sse_data(text)[0])["candidates"][0]["content"]["parts"] == [{"text": "done"}]
        # the router: another model, JSON asked for, non-streaming
        router = {**first, "generationConfig": {"responseMimeType": "application/json"}}
        status, text = post(server, "/v1beta/models/gemini-3.5-flash-lite:generateContent", router)
        answer = json.loads(json.loads(text)["candidates"][0]["content"]["parts"][0]["text"])
        assert status == 200 and set(answer) == {"reasoning", "model_choice"}
    assert plan.total_sent() == {"input_tokens": 30, "output_tokens": 5, "cached_tokens": 9}


OPENCODE_BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "description": {"type": "string"},
                "timeout": {"type": "number"},
            },
            "required": ["command", "description"],
        },
    },
}


def test_chat_completions_tool_call_chunks_usage_and_done():
    plan = Plan("m-main", PLAN)
    with ScriptedServer(plan, ["openai_chat"]) as server:
        first = {
            "model": "m-main",
            "stream": True,
            "messages": [{"role": "user", "content": "go"}],
            "tools": [OPENCODE_BASH],
        }
        status, text = post(server, "/v1/chat/completions", first)
        assert status == 200
        data = sse_data(text)
        assert data[-1] == "[DONE]"
        chunks = [json.loads(d) for d in data[:-1]]
        call = chunks[0]["choices"][0]["delta"]["tool_calls"][0]
        assert call["index"] == 0 and call["function"]["name"] == "bash"
        # required string parameters besides the command get a placeholder
        assert json.loads(call["function"]["arguments"]) == {
            "command": PLAN[0]["shell"],
            "description": "scripted step",
        }
        assert chunks[1]["choices"][0]["finish_reason"] == "tool_calls"
        assert chunks[2]["choices"] == []
        usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
        assert chunks[2]["usage"] == {**usage, "prompt_tokens_details": {"cached_tokens": 4}}
        assistant = {"role": "assistant", "content": None, "tool_calls": [call]}
        second = {**first, "messages": [*first["messages"], assistant, {"role": "tool", "content": "ok"}]}
        chunks = [json.loads(d) for d in sse_data(post(server, "/v1/chat/completions", second)[1])[:-1]]
        assert chunks[0]["choices"][0]["delta"]["content"] == "done"
        assert chunks[1]["choices"][0]["finish_reason"] == "stop"
        # a request offering no tools (OpenCode's title) is a side call, even for the main model
        title = {"model": "m-main", "stream": True, "messages": [{"role": "user", "content": "title?"}]}
        chunks = [json.loads(d) for d in sse_data(post(server, "/v1/chat/completions", title)[1])[:-1]]
        assert chunks[0]["choices"][0]["delta"]["content"] == SIDE_ANSWER
        # non-streaming answers carry the same message
        status, text = post(server, "/v1/chat/completions", {**first, "stream": False})
        assert json.loads(text)["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "bash"
    assert plan.total_sent() == {"input_tokens": 40, "output_tokens": 7, "cached_tokens": 13}


def test_chat_completions_picks_qwen_shell_tool():
    plan = Plan("qwen3-coder-plus", PLAN)
    tools = [
        {"type": "function", "function": {"name": "read_file", "parameters": {}}},
        {"type": "function", "function": {"name": "run_shell_command", "parameters": {"required": ["command"]}}},
    ]
    with ScriptedServer(plan, ["openai_chat"]) as server:
        body = {
            "model": "qwen3-coder-plus",
            "stream": True,
            "messages": [{"role": "user", "content": "go"}],
            "tools": tools,
        }
        chunk = json.loads(sse_data(post(server, "/v1/chat/completions", body)[1])[0])
    call = chunk["choices"][0]["delta"]["tool_calls"][0]["function"]
    assert call["name"] == "run_shell_command" and json.loads(call["arguments"]) == {"command": PLAN[0]["shell"]}
