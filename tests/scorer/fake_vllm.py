"""A stand-in for `vllm serve` (vLLM cannot be installed on these CPU machines): installed
as an executable named `vllm` on PATH, it records its argv and every request body to
$FAKE_VLLM_LOG (JSON lines) and answers the OpenAI-compatible API that inspect's vLLM
provider speaks, each completion being $FAKE_VLLM_REPLY, or, with $FAKE_VLLM_REPLIES (a JSON file of
{marker: reply}), the reply whose marker the request's messages contain. Standard library only."""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = os.environ["FAKE_VLLM_LOG"]
REPLY = os.environ.get("FAKE_VLLM_REPLY", "ANSWER: 0")
REPLIES = {}
if os.environ.get("FAKE_VLLM_REPLIES"):
    with open(os.environ["FAKE_VLLM_REPLIES"]) as f:
        REPLIES = json.load(f)


def reply_for(body):
    text = json.dumps(body.get("messages", []))
    return next((reply for marker, reply in REPLIES.items() if marker in text), REPLY)


def record(kind, obj):
    with open(LOG, "a") as f:
        f.write(json.dumps({"kind": kind, "data": obj}) + "\n")


argv = sys.argv[1:]
record("argv", argv)
model = argv[1]
port = int(argv[argv.index("--port") + 1])


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def _send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.endswith("/v1/models"):
            self._send(200, {"object": "list", "data": [{"id": model, "object": "model", "max_model_len": 32768}]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        record("request", {"path": self.path, "body": body})
        if not self.path.endswith("/chat/completions"):
            self._send(404, {"error": "not found"})
            return
        self._send(200, {
            "id": "cmpl-1", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply_for(body)}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
        })


ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
