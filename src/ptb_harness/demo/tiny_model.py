"""A tiny Llama-style causal LM with a character-level tokenizer, built locally.

It stands in for a base model in the demo campaign: random weights (so it scores 0 on
the arith task), Hugging Face format, loadable with AutoModelForCausalLM, made in well
under a second on a CPU with no download.
"""

from __future__ import annotations

import string
from pathlib import Path

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
# '####' is one token, so a GSM8K-style answer "#### 123" is a few new tokens
VOCAB = SPECIALS + ["####"] + list(string.digits + string.ascii_letters + " +-*/=?.,:;!()'\"\n")


def build_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(VOCAB)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"####|[\s\S]"), behavior="isolated")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        padding_side="left",
    )


def build_tiny_model(out_dir: Path, seed: int = 0) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(VOCAB),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.replace(out_dir)
    return out_dir
