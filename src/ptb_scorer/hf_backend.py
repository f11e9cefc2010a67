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

A request with a seed (the run's per-request seeds, ``ptb_scorer.engine.seeded``) is
generated with torch's generator seeded by it, by itself: the generator is global, so a
seed holds for one request only when no other request shares its batch; its output
depends on its prompt and seed alone, not on what it was batched with. Requests without
a seed are batched as inspect batches them.
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
#: the seed of the request being generated, set per generate call
_SEED: contextvars.ContextVar[int | None] = contextvars.ContextVar("ptb_hf_seed", default=None)


class SeededModel:
    """The loaded model as one seeded request sees it: ``generate`` seeds torch first. A
    new object per request, so inspect's batcher (which batches the requests whose
    generator is the same bound method) generates it alone, in its one batch thread."""

    def __init__(self, model: Any, seed: int) -> None:
        self._model, self._seed = model, seed

    @property
    def device(self) -> Any:
        return self._model.device

    def generate(self, **kwargs: Any) -> Any:
        import torch

        torch.manual_seed(self._seed)  # the CPU's and every GPU's generator
        return self._model.generate(**kwargs)


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

    @property
    def model(self) -> Any:
        """The loaded model; for a seeded request, a SeededModel around it."""
        loaded, seed = getattr(self, "_loaded", None), _SEED.get()
        return loaded if seed is None or loaded is None else SeededModel(loaded, seed)

    @model.setter
    def model(self, value: Any) -> None:
        self._loaded = value

    async def generate(self, input: list[Any], tools: list[Any], tool_choice: Any, config: GenerateConfig) -> Any:
        messages = await messages_to_openai(input)
        token = _REQUEST.set(openai_request(messages, tools))
        seed_token = _SEED.set(config.seed)
        try:
            output: ModelOutput = await super().generate(input, tools, tool_choice, config)
        finally:
            _SEED.reset(seed_token)
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
