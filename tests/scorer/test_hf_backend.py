"""ptb_scorer.hf_backend in process, on a real tiny model: a seeded request is generated
without generate's dict output (which returns the KV cache and so keeps transformers
from deferring its stop check: a GPU sync per token) and gives the same tokens as
inspect's own path; a request that asks for logits keeps the dict."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from family_models import build_family_model

pytest.importorskip("inspect_ai")

PROMPTS = ["What is 12 + 30?", "Name a prime number bigger than ten.", "x"]


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Path:
    return build_family_model("llama3", tmp_path_factory.mktemp("family") / "llama3")


def _generate_input(model: Any, tokenizer: Any, prompt: str, calls: list[set[str]], **kwargs: Any) -> Any:
    """inspect's GenerateInput for ``prompt``, built as its HuggingFaceAPI.generate builds it
    (inspect_ai 0.3.285), its generator recording the arguments each call was given."""
    from inspect_ai.model._providers import hf as inspect_hf

    def recording_generate(**arguments: Any) -> Any:
        calls.append(set(arguments))
        return model.generate(**arguments)

    return inspect_hf.GenerateInput(
        input=prompt,
        device=model.device,
        tokenizer=functools.partial(tokenizer, return_tensors="pt", padding=True, add_special_tokens=False),
        generator=functools.partial(recording_generate, **kwargs, return_dict_in_generate=True),
        decoder=functools.partial(tokenizer.batch_decode, skip_special_tokens=True, clean_up_tokenization_spaces=False),
        batch_size=1,
    )


def _inspects_path(input: Any, seed: int) -> Any:
    """What generate_seeded did before: inspect's _generate_batch on its own generator."""
    from concurrent.futures import Future

    import torch
    from inspect_ai.model._providers import hf as inspect_hf

    future: Future[Any] = Future()
    torch.manual_seed(seed)
    inspect_hf._generate_batch([inspect_hf._QueueItem(input=input, future=future, key=None)])
    return future.result()


def test_a_seeded_request_is_generated_without_the_dict_and_its_tokens_are_inspects(llama):
    """Sampled (temperature 1), three prompts x three seeds: the backend's answer, token
    count and token usage equal inspect's path, and its generate call had no
    return_dict_in_generate; the answers differ across seeds (sampling did happen)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ptb_scorer.hf_backend import generate_seeded

    model = AutoModelForCausalLM.from_pretrained(llama)
    tokenizer = AutoTokenizer.from_pretrained(llama)
    tokenizer.padding_side = "left"
    sampled = {"do_sample": True, "temperature": 1.0, "max_new_tokens": 24}
    answers = set()
    for prompt in PROMPTS:
        for seed in (1, 2, 3):
            theirs_calls: list[set[str]] = []
            ours_calls: list[set[str]] = []
            theirs = _inspects_path(_generate_input(model, tokenizer, prompt, theirs_calls, **sampled), seed)
            ours = generate_seeded(_generate_input(model, tokenizer, prompt, ours_calls, **sampled), seed)
            assert (ours.output, ours.input_tokens, ours.output_tokens) == (
                theirs.output,
                theirs.input_tokens,
                theirs.output_tokens,
            ), (prompt, seed)
            assert ours.logprobs is None and ours.hidden_states is None
            assert "return_dict_in_generate" in theirs_calls[0]
            assert ours_calls == [theirs_calls[0] - {"return_dict_in_generate"}]
            answers.add(ours.output)
    assert len(answers) > len(PROMPTS)


def test_a_request_that_asks_for_logits_keeps_the_dict_and_its_logprobs(llama):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ptb_scorer.hf_backend import generate_seeded, sequences_only

    model = AutoModelForCausalLM.from_pretrained(llama)
    tokenizer = AutoTokenizer.from_pretrained(llama)
    calls: list[set[str]] = []
    kwargs = {"do_sample": False, "max_new_tokens": 5, "output_logits": True}
    input = _generate_input(model, tokenizer, PROMPTS[0], calls, **kwargs)
    assert sequences_only(input.generator) is input.generator
    out = generate_seeded(input, 7)
    assert "return_dict_in_generate" in calls[0]
    assert out.logprobs is not None and out.logprobs.shape[0] == out.output_tokens
    # not a partial (nothing known of its arguments): left as it is
    assert sequences_only(model.generate) == model.generate
