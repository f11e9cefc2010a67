"""inspect's transformers provider, rendering prompts as vLLM does (model name ``ptb_hf/local``).

inspect's own ``hf`` provider renders a different prompt than its vLLM provider would for
the same sample: it always passes ``enable_thinking`` (``None`` unless set, which some
templates read as "off"), gives the template tools in another shape than the OpenAI
tools vLLM hands over, and tokenizes the rendered prompt with the tokenizer's special
tokens added, so a template that writes BOS gets a second one. This subclass renders the
request with :func:`ptb_scorer.render.render` (the OpenAI messages and tools inspect
would send to vLLM, prepared as vLLM prepares them), with the chat template and variables
it is given and nothing else, and the scorer tokenizes without added special tokens
(``tokenizer_call_args``). Importing the module registers the provider.
"""

from __future__ import annotations

import contextvars
import json
from pathlib import Path
from typing import Any

from inspect_ai.model import GenerateConfig, ModelAPI, ModelOutput, modelapi
from inspect_ai.model._openai import messages_to_openai, openai_chat_tools
from inspect_ai.model._providers.hf import HuggingFaceAPI
from inspect_ai.util._json import JSON_SCHEMA_EXTENDED_FIELDS
from transformers import AutoTokenizer

from ptb_scorer.render import render

#: the request being rendered: (OpenAI messages, OpenAI tools), set per generate call
_REQUEST: contextvars.ContextVar[tuple[list[Any], list[Any]]] = contextvars.ContextVar("ptb_hf_request")


def openai_request(messages: list[Any], tools: list[Any]) -> tuple[list[Any], list[Any]]:
    """What inspect's vLLM provider sends for them (its OpenAI-compatible request: tools
    with ``strict``, extended JSON-schema fields left out), as JSON decodes it."""
    openai_tools = openai_chat_tools(tools, exclude=JSON_SCHEMA_EXTENDED_FIELDS)
    for tool in openai_tools:
        tool["function"]["strict"] = True
    return json.loads(json.dumps(messages)), json.loads(json.dumps(openai_tools))


class TemplateHF(HuggingFaceAPI):
    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig | None = None,
        **model_args: Any,
    ) -> None:
        self.template_kwargs: dict[str, Any] = dict(model_args.pop("chat_template_kwargs", None) or {})
        prompt_log = model_args.pop("prompt_log", None)
        self.prompt_log = Path(prompt_log) if prompt_log else None
        model_path = model_args.get("model_path")
        super().__init__(model_name, base_url, api_key, config or GenerateConfig(), **model_args)
        if not isinstance(self.chat_template, str):
            raise ValueError("ptb_hf needs the chat template's text (model arg chat_template)")
        # the log tokenizes with a tokenizer of its own: the generation thread may be using the other
        self._log_tokenizer = AutoTokenizer.from_pretrained(model_path) if self.prompt_log else None

    async def generate(self, input: list[Any], tools: list[Any], tool_choice: Any, config: GenerateConfig) -> Any:
        messages = await messages_to_openai(input)
        token = _REQUEST.set(openai_request(messages, tools))
        try:
            output: ModelOutput = await super().generate(input, tools, tool_choice, config)
        finally:
            _REQUEST.reset(token)
        return output

    def hf_chat(self, messages: list[Any], tools: list[Any]) -> str:
        openai_messages, openai_tools = _REQUEST.get()
        prompt = render(self.tokenizer, self.chat_template, openai_messages, openai_tools, self.template_kwargs)
        if self.prompt_log is not None and self._log_tokenizer is not None:
            ids = self._log_tokenizer(prompt, **self.tokenizer_call_args)["input_ids"]
            with open(self.prompt_log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"prompt": prompt, "input_ids": ids, "messages": openai_messages}) + "\n")
        return prompt


@modelapi(name="ptb_hf")
def ptb_hf() -> type[ModelAPI]:
    return TemplateHF
