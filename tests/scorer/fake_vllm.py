"""A stand-in for `vllm serve` (vLLM cannot be installed on these CPU machines): installed
as an executable named `vllm` on PATH, it records its argv and every request body to
$FAKE_VLLM_LOG (JSON lines) and answers the OpenAI-compatible API that inspect's vLLM
provider speaks, each completion being $FAKE_VLLM_REPLY, or, with $FAKE_VLLM_REPLIES (a
JSON file of {marker: reply}), the reply whose marker the request's messages contain.

It also renders each chat request into the prompt, as vLLM's server does, and records the
prompt and its token ids ("render"): with the template file it was given
(--chat-template), the served model's tokenizer, the request's messages (content as one
string, or as a list of text parts for a template that loops over a message's content),
tools (the OpenAI function tools as sent), chat_template_kwargs (those the template reads
or apply_chat_template takes), add_generation_prompt / continue_final_message, and
tokenization without added special tokens. This is our reading of vLLM's renderer
written independently of the scorer's own (ptb_scorer.render), so the two can disagree.
It is not vLLM."""

import inspect
import json
import os
import sys
import threading
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
TEMPLATE = None
if "--chat-template" in argv:
    with open(argv[argv.index("--chat-template") + 1]) as f:
        TEMPLATE = f.read()


def loads_content(template):
    """vLLM's "openai" content format: the template has a for loop over some message's content."""
    import jinja2.nodes as n
    from transformers.utils.chat_template_utils import _compile_jinja_template

    tree = _compile_jinja_template(template).environment.parse(template)
    targets = {f.target.name for f in tree.find_all(n.For) if isinstance(f.target, n.Name)}
    for loop in tree.find_all(n.For):
        it = loop.iter
        while isinstance(it, (n.Filter, n.Test)) and it.node is not None:
            it = it.node
        key = it.attr if isinstance(it, n.Getattr) else getattr(getattr(it, "arg", None), "value", None)
        if key == "content" and isinstance(getattr(it, "node", None), n.Name) and it.node.name in targets:
            return True
    return False


def conversation(messages, as_parts):
    out = []
    for m in messages:
        c = m.get("content")
        texts = [c] if isinstance(c, str) else [p["text"] for p in c or [] if p.get("type") == "text"]
        parts = [{"type": "text", "text": t} for t in texts]
        turn = {"role": m["role"], "content": parts if as_parts else "\n".join(texts)}
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = json.loads(json.dumps(m["tool_calls"]))
            for call in calls:
                args = call["function"].get("arguments")
                try:
                    call["function"]["arguments"] = json.loads(args) if isinstance(args, str) else args
                except ValueError:
                    call["function"]["arguments"] = {}
            turn["tool_calls"] = calls
        if m["role"] == "tool":
            turn["content"] = "\n".join(texts)
            if "tool_call_id" in m:
                turn["tool_call_id"] = m["tool_call_id"]
        if isinstance(m.get("name"), str):
            turn["name"] = m["name"]
        out.append(turn)
    return out


TOKENIZER = []
#: one render at a time (a fast tokenizer used from two threads at once raises "Already borrowed")
RENDER_LOCK = threading.Lock()


def render(body):
    import jinja2.meta
    from transformers import AutoTokenizer, PreTrainedTokenizerBase
    from transformers.utils.chat_template_utils import _compile_jinja_template

    if not TOKENIZER:  # the served model's, loaded once
        TOKENIZER.append(AutoTokenizer.from_pretrained(model))
    tokenizer = TOKENIZER[0]
    tools = None
    if body.get("tools"):
        tools = []
        for t in body["tools"]:  # the request's tool model, dumped: declared fields, then extras
            f = dict(t["function"])
            fn = {"name": f.pop("name"), "description": f.pop("description", None)}
            fn["parameters"] = f.pop("parameters", None)
            tools.append({"type": t.get("type", "function"), "function": {**fn, **f}})
    env = _compile_jinja_template(TEMPLATE).environment
    allowed = jinja2.meta.find_undeclared_variables(env.parse(TEMPLATE))
    allowed |= set(inspect.signature(PreTrainedTokenizerBase.apply_chat_template).parameters)
    kwargs = {k: v for k, v in (body.get("chat_template_kwargs") or {}).items() if k in allowed}
    prompt = tokenizer.apply_chat_template(
        conversation(body["messages"], loads_content(TEMPLATE)),
        tools=tools,
        chat_template=TEMPLATE,
        tokenize=False,
        add_generation_prompt=body.get("add_generation_prompt", True),
        continue_final_message=body.get("continue_final_message", False),
        **kwargs,
    )
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return {"prompt": prompt, "input_ids": ids, "bos_token_id": tokenizer.bos_token_id}


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
        if TEMPLATE is not None:
            with RENDER_LOCK:
                record("render", {"model": model, "messages": body["messages"], **render(body)})
        message = {"role": "assistant", "content": reply_for(body)}
        usage = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        choice = {"index": 0, "finish_reason": "stop", "message": message}
        reply = {"id": "c1", "object": "chat.completion", "created": 0, "model": model, "choices": [choice]}
        self._send(200, {**reply, "usage": usage})


ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
