"""Renderers: one event of a known format -> lines of the common transcript shape.

Every event line is `[time] KIND: text` with KIND one of ASSISTANT, THINKING, TOOL CALL,
TOOL RESULT, USER, SYSTEM, ERROR, RESULT (and the parser's TEXT for a line that is no
event). A multi-line value (a tool's output, the prompt, the model's text) goes on over
continuation lines and its control characters are escaped (core.text.transcript_text,
applied by the parser's writer to every line a renderer returns): whatever a tool prints,
no line of the transcript starts like an event line unless the harness rendered an event
there. A tool's name or call id is kept on its line (core.text.transcript_label). Long tool inputs and
outputs are cut with a count of what was cut. Each renderer also gathers the header facts
(CLI version, model) and the usage and cost totals the format reports.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from ptb_harness.core.text import transcript_label as _label
from ptb_harness.traces.token_usage import TokenUsage

TOOL_INPUT_LIMIT = 1000
TOOL_OUTPUT_LIMIT = 2000


def cut(text: Any, limit: int) -> str:
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False, sort_keys=True)
    text = text.replace("\r", "").rstrip("\n")
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters cut]"


def tool_call(name: Any, call_id: Any, args: Any) -> str:
    return f"TOOL CALL {_label(name)} ({_label(call_id)}): {cut(args if args is not None else '', TOOL_INPUT_LIMIT)}"


def tool_result(call_id: Any, output: Any, note: str = "") -> str:
    return f"TOOL RESULT ({_label(call_id)}){note}: {cut(output if output is not None else '', TOOL_OUTPUT_LIMIT)}"


def one_line(text: Any) -> str:
    return (text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)).rstrip("\n")


class Renderer:
    """Base: header facts, token usage and cost totals."""

    name = "plain"
    #: event types of this format (a line with no distinguishing key is accepted by type)
    types: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.facts: dict[str, str] = {}
        self.usage: Counter = Counter()
        self.cost_usd: float | None = None
        self.events: Counter = Counter()
        #: usage.json's quantities (None = the trace does not say)
        self.tally = TokenUsage()
        self._held_kind: str | None = None
        #: streamed chunks held back until a change of kind (emptied in place by flush)
        self.held: list[str] = []

    def render(self, obj: dict[str, Any]) -> list[str]:
        """One event's lines, the event counted by its type (the header's events line)."""
        t = obj.get("type")
        self.events[t] += 1
        return self.render_event(obj, t)

    def render_event(self, obj: dict[str, Any], t: Any) -> list[str]:  # pragma: no cover - abstract
        """One event's lines, in the format's own way (t: its type)."""
        raise NotImplementedError

    def hold(self, kind: str, chunk: str) -> list[str]:
        """Join consecutive streamed chunks of one kind (a thought sent token by token)
        into one line; returns the line a change of kind releases."""
        out = self.flush() if kind != self._held_kind else []
        self._held_kind = kind
        self.held.append(chunk)
        return out

    def flush(self) -> list[str]:
        """The line still held back (at the end of the trace, or before another event)."""
        if not self.held:
            return []
        line = f"{self._held_kind}: {one_line(''.join(self.held))}"
        self.held.clear()
        self._held_kind = None
        return [line]

    def fact(self, key: str, value: Any) -> None:
        if value and key not in self.facts:
            self.facts[key] = _label(value)

    def add_usage(self, usage: Any, keys: tuple[str, ...]) -> None:
        if isinstance(usage, dict):
            for k in keys:
                v = usage.get(k)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    self.usage[k] += v

    def summary(self) -> list[str]:
        out = []
        if self.usage:
            out.append("tokens: " + ", ".join(f"{k} {v:,}" for k, v in self.usage.items()))
        if self.cost_usd is not None:
            out.append(f"cost: ${self.cost_usd:.4f}")
        return out


def _number_in(d: dict[str, Any], key: str) -> bool:
    v = d.get(key)
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class Claude(Renderer):
    name = "claude"
    types = frozenset({"system", "assistant", "user", "result", "stream_event", "rate_limit_event"})

    def render_event(self, obj: dict[str, Any], t: Any) -> list[str]:
        if t == "system":
            self.fact("cli_version", obj.get("claude_code_version"))
            self.fact("model", obj.get("model"))
            if obj.get("subtype") == "init":
                self.tally.add("sessions", 1)
                return [f"SYSTEM: init, model {obj.get('model', '?')}, {len(obj.get('tools') or [])} tools"]
            return [f"SYSTEM: {obj.get('subtype', '')}"]
        if t in ("assistant", "user"):
            message = obj.get("message") or {}
            self.fact("model", message.get("model"))
            self.add_usage(message.get("usage"), ("input_tokens", "output_tokens"))
            if t == "assistant":
                blocks = [b for b in message.get("content") or [] if isinstance(b, dict)]
                self.tally.add("tool_calls", *(1 for b in blocks if b.get("type") == "tool_use"))
            return [line for block in message.get("content") or [] for line in self._block(block, t)]
        if t == "result":
            if isinstance(obj.get("total_cost_usd"), (int, float)):
                self.cost_usd = float(obj["total_cost_usd"])
            # one result per session (a resume writes another): its totals add up
            self._tally_tokens(obj.get("usage") if isinstance(obj.get("usage"), dict) else {})
            self.tally.add("cost_usd", obj.get("total_cost_usd"))
            self.tally.add("turns", obj.get("num_turns"))
            kind = "ERROR" if obj.get("is_error") else "RESULT"
            text = f"{obj.get('subtype', '')}, {obj.get('num_turns', '?')} turns, {obj.get('duration_ms', '?')} ms"
            return [f"{kind}: {text}"] + (
                [f"RESULT: {cut(obj['result'], TOOL_OUTPUT_LIMIT)}"] if obj.get("result") else []
            )
        return []  # stream_event / rate_limit_event: counted, not shown

    def _tally_tokens(self, u: dict[str, Any]) -> None:
        """A result's token totals; Anthropic's input_tokens leaves out the cache reads and writes."""
        if _number_in(u, "input_tokens"):
            cache = (u.get("cache_read_input_tokens"), u.get("cache_creation_input_tokens"))
            self.tally.add("input_tokens", u.get("input_tokens"), *cache)
            self.tally.add("cached_tokens", u.get("cache_read_input_tokens", 0))
        self.tally.add("output_tokens", u.get("output_tokens"))

    def _block(self, block: Any, role: str) -> list[str]:
        if not isinstance(block, dict):
            return []
        kind = block.get("type")
        if kind == "text":
            return [f"{'ASSISTANT' if role == 'assistant' else 'USER'}: {one_line(block.get('text', ''))}"]
        if kind in ("thinking", "redacted_thinking"):
            return [f"THINKING: {one_line(block.get('thinking', '[redacted]'))}"]
        if kind == "tool_use":
            return [tool_call(block.get("name"), block.get("id"), block.get("input"))]
        if kind == "tool_result":
            content = block.get("content")
            if isinstance(content, list):
                content = "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
            err = " ERROR" if block.get("is_error") else ""
            return [tool_result(block.get("tool_use_id"), content, err)]
        return []


class Qwen(Claude):
    """Qwen Code stream-json: Claude Code's event shapes (system/init, assistant, user,
    result) with its own version key; over an OpenAI-compatible API its input_tokens
    already include the cached ones, and it states no cost. A result's usage counts the
    whole session, so a resumed session (--continue, same session_id) restates the
    earlier runs' tokens: only its growth is added."""

    name = "qwen"

    def __init__(self) -> None:
        super().__init__()
        self._session: str = ""
        self._session_tokens: dict[str, dict[str, float]] = {}

    def render(self, obj: dict[str, Any]) -> list[str]:
        if obj.get("type") == "system":
            self.fact("cli_version", obj.get("qwen_code_version"))
        if obj.get("type") == "result":
            self._session = str(obj.get("session_id", ""))
        return super().render(obj)

    def _tally_tokens(self, u: dict[str, Any]) -> None:
        now = {"input_tokens": u.get("input_tokens"), "output_tokens": u.get("output_tokens")}
        if _number_in(u, "input_tokens"):
            now["cached_tokens"] = u.get("cache_read_input_tokens", 0)
        before = self._session_tokens.setdefault(self._session, {})
        for key, value in now.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.tally.add(key, value - before.get(key, 0))
                before[key] = value


#: Codex items that are tool calls (each counted once, when it completes)
_CODEX_TOOLS = ("command_execution", "file_change", "mcp_tool_call", "web_search")


class Codex(Renderer):
    """Codex `exec --json`: thread/turn/item events."""

    name = "codex"
    types = frozenset({"thread.started", "turn.started", "turn.completed", "turn.failed", "error"})

    def __init__(self) -> None:
        super().__init__()
        self._thread = ""
        self._thread_usage: dict[str, dict[str, Any]] = {}

    def render_event(self, obj: dict[str, Any], t: Any) -> list[str]:
        if t == "thread.started":
            self.tally.add("sessions", 1)
            self._thread = str(obj.get("thread_id", ""))
            return [f"SYSTEM: thread {obj.get('thread_id', '')}"]
        if t == "turn.completed":
            self.add_usage(obj.get("usage"), ("input_tokens", "cached_input_tokens", "output_tokens"))
            self._tally_turn(obj.get("usage") if isinstance(obj.get("usage"), dict) else {})
            return []
        if t in ("turn.failed", "error"):
            err = obj.get("error") or {}
            return [f"ERROR: {one_line(err.get('message', err) if isinstance(err, dict) else obj.get('message', err))}"]
        if t == "item.completed" or (
            t == "item.started" and (obj.get("item") or {}).get("type") == "command_execution"
        ):
            return self._item(obj.get("item") or {}, started=t == "item.started")
        return []

    def _tally_turn(self, usage: dict[str, Any]) -> None:
        """A turn's usage is the thread's total so far (a resumed thread goes on counting
        from its earlier turns): add only what grew since the thread's last turn."""
        last = self._thread_usage.get(self._thread, {})
        # Codex's input_tokens already include the cached ones
        for ours, theirs in (("input_tokens", "input_tokens"), ("cached_tokens", "cached_input_tokens"),
                             ("output_tokens", "output_tokens")):  # fmt: skip
            value = usage.get(theirs)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.tally.add(ours, value - last.get(theirs, 0))
        self._thread_usage[self._thread] = usage
        self.tally.add("turns", 1)

    def _item(self, item: dict[str, Any], started: bool) -> list[str]:
        kind = item.get("type") or item.get("item_type")
        if kind in _CODEX_TOOLS:
            if not started:
                self.tally.add("tool_calls", 1)
            return self._tool_item(kind, item, started)
        if kind == "agent_message":
            return [f"ASSISTANT: {one_line(item.get('text', ''))}"]
        if kind == "reasoning":
            return [f"THINKING: {one_line(item.get('text', ''))}"]
        if kind == "todo_list":
            return [f"SYSTEM: todo list: {cut(item.get('items'), TOOL_INPUT_LIMIT)}"]
        if kind == "error":
            return [f"ERROR: {one_line(item.get('message', ''))}"]
        return []

    @staticmethod
    def _tool_item(kind: str, item: dict[str, Any], started: bool) -> list[str]:
        if kind == "command_execution":
            if started:
                return [tool_call("shell", item.get("id"), item.get("command"))]
            out = item.get("aggregated_output", "")
            return [tool_result(item.get("id"), out, f" exit {item.get('exit_code')}")]
        if kind == "file_change":
            changes = ", ".join(
                f"{c.get('kind')} {c.get('path')}" for c in item.get("changes") or [] if isinstance(c, dict)
            )
            return [tool_call("apply_patch", item.get("id"), changes)]
        if kind == "mcp_tool_call":
            return [tool_call(f"{item.get('server')}.{item.get('tool')}", item.get("id"), item.get("arguments"))]
        return [tool_call("web_search", item.get("id"), item.get("query"))]


class CodexLegacy(Renderer):
    """Codex before the dotted events: {"id", "msg": {"type", ...}} after config/prompt lines."""

    name = "codex_legacy"
    types = frozenset()

    def render(self, obj: dict[str, Any]) -> list[str]:
        msg = obj.get("msg")
        if not isinstance(msg, dict):
            self.fact("model", obj.get("model"))
            return [f"USER: {one_line(obj['prompt'])}"] if "prompt" in obj else []
        t = msg.get("type")
        self.events[t] += 1
        if t == "agent_message":
            return [f"ASSISTANT: {one_line(msg.get('message', ''))}"]
        if t in ("agent_reasoning", "agent_reasoning_raw_content"):
            return [f"THINKING: {one_line(msg.get('text', ''))}"]
        if t == "exec_command_begin":
            return [tool_call("shell", msg.get("call_id"), msg.get("command"))]
        if t == "exec_command_end":
            out = (msg.get("stdout") or "") + (msg.get("stderr") or "")
            return [tool_result(msg.get("call_id"), out, f" exit {msg.get('exit_code')}")]
        if t == "token_count":
            self.usage = Counter()  # cumulative in this format: keep the last
            self.add_usage(
                msg.get("info", {}).get("total_token_usage") if isinstance(msg.get("info"), dict) else msg,
                ("input_tokens", "output_tokens"),
            )
            return []
        if t == "error":
            return [f"ERROR: {one_line(msg.get('message', ''))}"]
        if t == "task_complete":
            return ["RESULT: task complete"]
        return []


class Gemini(Renderer):
    """Gemini CLI stream-json; consecutive `delta` chunks of one role become one line."""

    name = "gemini"
    types = frozenset({"init", "message", "tool_use", "tool_result", "error", "result"})

    def __init__(self) -> None:
        super().__init__()
        #: the last event was the model's (text or a tool call): a new turn starts otherwise
        self._in_model_turn = False

    def render_event(self, obj: dict[str, Any], t: Any) -> list[str]:
        self._count_turn(t, obj)
        if t == "message" and obj.get("delta"):
            return self.hold("ASSISTANT" if obj.get("role") == "assistant" else "USER", str(obj.get("content", "")))
        out = self.flush()
        if t == "init":
            self.fact("model", obj.get("model"))
            self.tally.add("sessions", 1)
            return out + [f"SYSTEM: init, model {obj.get('model', '?')}"]
        if t == "message":
            role = "ASSISTANT" if obj.get("role") == "assistant" else "USER"
            return out + [f"{role}: {one_line(obj.get('content', ''))}"]
        if t == "tool_use":
            self.tally.add("tool_calls", 1)
            return out + [tool_call(obj.get("tool_name"), obj.get("tool_id"), obj.get("parameters"))]
        if t == "tool_result":
            err = "" if obj.get("status") in (None, "success") else f" {obj.get('status')}"
            return out + [tool_result(obj.get("tool_id"), obj.get("output"), err)]
        if t == "error":
            return out + [f"ERROR: {one_line(obj.get('message', ''))}"]
        if t == "result":
            stats = obj.get("stats") or {}
            self.add_usage(stats, ("input_tokens", "output_tokens", "total_tokens"))
            # one result per session (a resume writes another); input_tokens include `cached`
            self.tally.add("input_tokens", stats.get("input_tokens"))
            self.tally.add("output_tokens", stats.get("output_tokens"))
            self.tally.add("cached_tokens", stats.get("cached"))
            return out + [f"RESULT: {obj.get('status', '')}, {stats.get('tool_calls', '?')} tool calls"]
        return out

    def _count_turn(self, t: Any, obj: dict[str, Any]) -> None:
        """Turns: model responses, each a run of assistant text and tool calls (the
        stream has no per-request event)."""
        model_side = t == "tool_use" or (t == "message" and obj.get("role") == "assistant")
        if model_side and not self._in_model_turn:
            self.tally.add("turns", 1)
        self._in_model_turn = model_side


class GeminiJson(Renderer):
    """Gemini CLI --output-format json: one object with `response` and `stats`."""

    name = "gemini_json"
    types = frozenset()

    def render(self, obj: dict[str, Any]) -> list[str]:
        self.events["response"] += 1
        stats = obj.get("stats") or {}
        for model, m in (stats.get("models") or {}).items():
            self.fact("model", model)
            self.add_usage((m or {}).get("tokens"), ("prompt", "candidates", "total"))
        out = [f"ASSISTANT: {one_line(obj.get('response') or '')}"]
        if obj.get("error"):
            out.append(f"ERROR: {one_line(obj['error'])}")
        return out


class OpenCode(Renderer):
    """OpenCode `run --format json`: one step (model request) between step_start and
    step_finish, which states its tokens and cost. A run ends at a step_finish whose
    reason is not a tool call; a step after it starts another run (a resume)."""

    name = "opencode"
    types = frozenset({"step_start", "text", "tool_use", "step_finish", "error"})

    def __init__(self) -> None:
        super().__init__()
        self._run_ended = True

    def render_event(self, obj: dict[str, Any], t: Any) -> list[str]:
        part = obj.get("part") or {}
        if t == "step_start":
            self.tally.add("turns", 1)
            if self._run_ended:
                self.tally.add("sessions", 1)
            self._run_ended = False
            return []
        if t == "text":
            return [f"ASSISTANT: {one_line(part.get('text', ''))}"]
        if t == "tool_use":
            state = part.get("state") or {}
            self.tally.add("tool_calls", 1)
            lines = [tool_call(part.get("tool"), part.get("callID"), state.get("input"))]
            if "output" in state or state.get("status") in ("completed", "error"):
                err = " ERROR" if state.get("status") == "error" else ""
                out = state.get("output", state.get("error", ""))
                lines.append(tool_result(part.get("callID"), out, err))
            return lines
        if t == "step_finish":
            tokens = part.get("tokens") if isinstance(part.get("tokens"), dict) else {}
            self.add_usage(tokens, ("input", "output", "reasoning"))
            if isinstance(part.get("cost"), (int, float)):
                self.cost_usd = (self.cost_usd or 0.0) + float(part["cost"])
            self._tally_step(tokens, part.get("cost"))
            self._run_ended = part.get("reason") != "tool-calls"
            return []
        if t == "error":
            err = obj.get("error") or part
            return [f"ERROR: {one_line(err.get('message', err) if isinstance(err, dict) else err)}"]
        return []

    def _tally_step(self, tokens: dict[str, Any], cost: Any) -> None:
        """OpenCode's input leaves out the cache reads and writes; its output leaves out
        the reasoning tokens (the provider bills both as output)."""
        cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
        if _number_in(tokens, "input"):
            self.tally.add("input_tokens", tokens.get("input"), cache.get("read"), cache.get("write"))
            self.tally.add("cached_tokens", cache.get("read", 0))
        if _number_in(tokens, "output"):
            self.tally.add("output_tokens", tokens.get("output"), tokens.get("reasoning"))
        self.tally.add("cost_usd", cost)


class Cursor(Renderer):
    name = "cursor"
    types = frozenset({"system", "user", "assistant", "thinking", "tool_call", "result"})

    def render_event(self, obj: dict[str, Any], t: Any) -> list[str]:
        if t == "thinking":  # streamed token by token: one line per thought
            return self.hold("THINKING", str(obj["text"])) if obj.get("text") else self.flush()
        return self.flush() + self._event(obj, t)

    def _event(self, obj: dict[str, Any], t: Any) -> list[str]:
        if t == "system":
            self.fact("model", obj.get("model"))
            return [f"SYSTEM: init, model {obj.get('model', '?')}"]
        if t in ("assistant", "user"):
            content = (obj.get("message") or {}).get("content") or []
            text = "".join(c.get("text", "") for c in content if isinstance(c, dict))
            return [f"{'ASSISTANT' if t == 'assistant' else 'USER'}: {one_line(text)}"] if text else []
        if t == "tool_call":
            call = obj.get("tool_call") or {}
            name, body = next(iter(call.items()), ("tool", {}))
            body = body if isinstance(body, dict) else {}
            if obj.get("subtype") == "started":
                return [tool_call(name, obj.get("call_id"), body.get("args"))]
            return [tool_result(obj.get("call_id"), body.get("result"))]
        if t == "result":
            kind = "ERROR" if obj.get("is_error") else "RESULT"
            return [f"{kind}: {obj.get('duration_ms', '?')} ms: {cut(obj.get('result', ''), TOOL_OUTPUT_LIMIT)}"]
        return []


RENDERERS: dict[str, type[Renderer]] = {
    r.name: r for r in (Claude, Qwen, Codex, CodexLegacy, Gemini, GeminiJson, OpenCode, Cursor)
}
