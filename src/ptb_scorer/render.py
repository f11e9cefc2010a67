"""A chat request rendered into the prompt string exactly as vLLM's OpenAI server renders it.

vLLM (the engine of the final scoring, as upstream's) takes the messages and tools a
client sends (inspect's OpenAI conversion) and, before transformers'
``apply_chat_template`` with the served ``--chat-template``:

- gives each message's content as one string (text parts joined by a newline), or, for a
  template that loops over a message's content (the "openai" content format, which vLLM
  detects from the template's syntax), as a list of ``{"type": "text", ...}`` parts;
- keeps ``tool_calls`` of assistant messages with their arguments parsed into objects,
  ``tool_call_id`` of tool messages (their content as one string), ``name``;
- hands the tools over as OpenAI function tools (``{"type": "function", "function":
  {name, description, parameters, ...}}``);
- adds the generation prompt, or continues a final assistant message;
- tokenizes the prompt without adding special tokens (the template writes BOS where its
  family has one, so BOS appears once).

:func:`render` does the same for the transformers backend (:mod:`ptb_scorer.hf_backend`),
so both backends give the model the same prompt. Template variables (``kwargs``) pass
through unchanged: one the template does not read changes nothing on either backend.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any


def _names(node: Any, wanted: set[str]) -> bool:
    """``node`` reads one of the variables ``wanted`` (directly, or through a filter,
    test or slice of it: ``messages[1:]``, ``messages | selectattr(...)``)."""
    import jinja2.nodes as n

    if isinstance(node, n.Name):
        return node.name in wanted
    if isinstance(node, (n.Filter, n.Test)) and node.node is not None:
        return _names(node.node, wanted)
    if isinstance(node, n.Getitem) and isinstance(node.arg, n.Slice):
        return _names(node.node, wanted)
    return False


def _content_of(node: Any, wanted: set[str]) -> bool:
    """``node`` is ``m.content`` or ``m['content']`` (possibly filtered) for an ``m`` wanted."""
    import jinja2.nodes as n

    if isinstance(node, (n.Filter, n.Test)) and node.node is not None:
        return _content_of(node.node, wanted)
    if isinstance(node, n.Getattr):
        return node.attr == "content" and _names(node.node, wanted)
    if isinstance(node, n.Getitem) and isinstance(node.arg, n.Const):
        return node.arg.value == "content" and _names(node.node, wanted)
    return False


def _aliases(tree: Any, name: str) -> set[str]:
    """``name`` and every variable set from it (``{% set loop_messages = messages[1:] %}``)."""
    import jinja2.nodes as n

    found, grew = {name}, True
    while grew:
        grew = False
        for assign in tree.find_all(n.Assign):
            if isinstance(assign.target, n.Name) and assign.target.name not in found and _names(assign.node, found):
                found.add(assign.target.name)
                grew = True
    return found


def _loops(tree: Any) -> Iterator[Any]:
    import jinja2.nodes as n

    yield from tree.find_all(n.For)


@lru_cache(maxsize=16)
def content_format(template: str) -> str:
    """ "openai" when the template loops over a message's content, else "string" (vLLM's
    detection: a ``for`` over ``messages``, then a ``for`` over that message's content)."""
    import jinja2.nodes as n
    from transformers.utils.chat_template_utils import _compile_jinja_template

    try:
        tree = _compile_jinja_template(template).environment.parse(template)
    except Exception:
        return "string"
    messages = _aliases(tree, "messages")
    per_message = {
        loop.target.name for loop in _loops(tree) if isinstance(loop.target, n.Name) and _names(loop.iter, messages)
    }
    return "openai" if any(_content_of(loop.iter, per_message) for loop in _loops(tree)) else "string"


def _text_parts(content: Any) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    return [p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text" and p.get("text") is not None]


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, (dict, list)) else {}


def conversation(messages: Sequence[Mapping[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """The messages as the template sees them (vLLM's preparation, see the module doc)."""
    out = []
    for msg in messages:
        texts = _text_parts(msg.get("content"))
        turn: dict[str, Any] = {"role": msg["role"]}
        turn["content"] = [{"type": "text", "text": t} for t in texts] if fmt == "openai" else "\n".join(texts)
        if msg["role"] == "assistant" and msg.get("tool_calls"):
            turn["tool_calls"] = [
                {**call, "function": {**call["function"], "arguments": _arguments(call["function"].get("arguments"))}}
                for call in msg["tool_calls"]
            ]
        if msg.get("reasoning") is not None and msg["role"] == "assistant":
            turn["reasoning"] = turn["reasoning_content"] = msg["reasoning"]
        if msg["role"] == "tool":
            if "tool_call_id" in msg:
                turn["tool_call_id"] = msg["tool_call_id"]
            turn["content"] = "\n".join(texts)
        if isinstance(msg.get("name"), str):
            turn["name"] = msg["name"]
        out.append(turn)
    return out


def template_tools(tools: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    """OpenAI function tools as vLLM hands them to the template (its request model dumped:
    the declared fields first, then any extra the client sent, such as ``strict``)."""
    if not tools:
        return None
    out = []
    for tool in tools:
        fn = dict(tool["function"])
        declared = {"name": fn.pop("name"), "description": fn.pop("description", None)}
        declared["parameters"] = fn.pop("parameters", None)
        out.append({"type": tool.get("type", "function"), "function": {**declared, **fn}})
    return out


def render(
    tokenizer: Any,
    template: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    kwargs: Mapping[str, Any] | None = None,
) -> str:
    """The prompt vLLM would render for this chat request (messages and tools in OpenAI
    form, as sent on the wire)."""
    continue_final = bool(messages) and messages[-1]["role"] == "assistant"
    return tokenizer.apply_chat_template(
        conversation(messages, content_format(template)),
        tools=template_tools(tools),
        chat_template=template,
        tokenize=False,
        add_generation_prompt=not continue_final,
        continue_final_message=continue_final,
        **dict(kwargs or {}),
    )
