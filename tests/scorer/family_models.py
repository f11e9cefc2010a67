"""Tiny base models of the four families the scored tasks use (Qwen3, Gemma 3, SmolLM3,
Llama 3.x), each with a chat template written here in its family's shape: Qwen3's
thinking switch (``enable_thinking``, thinking on by default) and its ``<tool_call>``
tools section in the system turn; SmolLM3's metadata system turn (the rendering date,
``/think`` by default, ``/no_think`` in the system message, tools as XML, the
``{% generation %}`` block); Llama 3.1's mandatory system block (cutting knowledge date,
``date_string``), BOS, tools in the first user turn (``tools_in_user_message``); Gemma 3's
BOS, system text folded into the first user turn, content read as a list of parts (so
vLLM's "openai" content format), and no tools section. Not the published files (those
are not reachable here): stand-ins of their shape, to show that the scorer renders
whatever template the base model ships, byte for byte.

The tokenizers are character-level with each family's special tokens as single tokens;
the Llama and Gemma ones also add BOS themselves (as the real ones do), which is what
would double it if the scorer let the tokenizer add special tokens. Templates are saved
in the two places models ship them: tokenizer_config.json (Qwen3, Gemma 3, Llama) and
chat_template.jinja (SmolLM3).
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass
from pathlib import Path

#: the templates, one file per family (tests/scorer/family_templates/<family>.jinja)
TEMPLATES = Path(__file__).resolve().parent / "family_templates"


@dataclass(frozen=True)
class FamilyModel:
    family: str
    architecture: str
    specials: tuple[str, ...]
    bos: str | None
    eos: str
    #: the tokenizer adds BOS itself (Llama 3 and Gemma 3 tokenizers do)
    adds_bos: bool
    #: where the template is saved: tokenizer_config.json or chat_template.jinja
    template_file: str

    @property
    def template(self) -> str:
        return (TEMPLATES / f"{self.family}.jinja").read_text()


QWEN_SPECIALS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "</tool_call>")
LLAMA_SPECIALS = ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|python_tag|>")
GEMMA_SPECIALS = ("<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>")
FAMILIES = {
    "qwen3": FamilyModel(
        "qwen3", "Qwen3ForCausalLM", QWEN_SPECIALS, None, "<|im_end|>", False, "tokenizer_config.json"
    ),
    "smollm3": FamilyModel(
        "smollm3", "SmolLM3ForCausalLM", QWEN_SPECIALS, None, "<|im_end|>", False, "chat_template.jinja"
    ),
    "llama3": FamilyModel(
        "llama3", "LlamaForCausalLM", LLAMA_SPECIALS, "<|begin_of_text|>", "<|eot_id|>", True, "tokenizer_config.json"
    ),
    "gemma3": FamilyModel(
        "gemma3", "Gemma3ForCausalLM", GEMMA_SPECIALS, "<bos>", "<end_of_turn>", True, "tokenizer_config.json"
    ),
}

#: the characters the tokenizer knows besides the special tokens (anything else is <unk>)
CHARS = string.printable


def _tokenizer(fm: FamilyModel):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["<pad>", "<unk>", *fm.specials, *CHARS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in fm.specials])
    if fm.adds_bos:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{fm.bos} $A", special_tokens=[(fm.bos, vocab[fm.bos])]
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=fm.bos, eos_token=fm.eos, pad_token="<pad>", unk_token="<unk>",
        padding_side="left", chat_template=fm.template,
    )  # fmt: skip


#: the models' shapes: "tiny" for the tests (a forward pass costs next to nothing); "1b"
#: Llama 3.2 1B's layers (0.97e9 parameters, with the tiny vocabulary) for benchmarks on a
#: GPU, where generation and the load should cost what a real base model's do
SIZES = {
    "tiny": dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
        head_dim=16,
    ),
    "1b": dict(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64,
    ),
}  # fmt: skip


def _config(fm: FamilyModel, vocab_size: int, tokenizer, size: str = "tiny") -> object:
    import transformers

    common = dict(
        vocab_size=vocab_size, **SIZES[size], max_position_embeddings=4096, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id, tie_word_embeddings=True,
    )  # fmt: skip
    cls = {
        "qwen3": transformers.Qwen3Config,
        "smollm3": transformers.SmolLM3Config,
        "llama3": transformers.LlamaConfig,
        "gemma3": transformers.Gemma3TextConfig,
    }[fm.family]
    extra = {"sliding_window": 64, "query_pre_attn_scalar": 16} if fm.family == "gemma3" else {}
    return cls(**common, **extra)


def build_family_model(family: str, out_dir: Path, size: str = "tiny") -> Path:
    """A random model of ``family`` and ``size`` (SIZES) with its template, saved as a base
    model dir; other sizes than tiny are saved in bfloat16, as base models ship."""
    import torch
    import transformers

    fm = FAMILIES[family]
    torch.manual_seed(0)
    tokenizer = _tokenizer(fm)
    config = _config(fm, len(tokenizer), tokenizer, size)
    if size == "tiny":
        model = getattr(transformers, fm.architecture)(config)
    else:  # a billion random numbers are drawn in seconds on a GPU, a minute on a CPU
        with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
            model = getattr(transformers, fm.architecture)(config).to(torch.bfloat16)
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    if fm.template_file == "tokenizer_config.json":  # as most hub repos ship it
        jinja = out_dir / "chat_template.jinja"
        cfg = json.loads((out_dir / "tokenizer_config.json").read_text())
        cfg["chat_template"] = jinja.read_text()
        (out_dir / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2))
        jinja.unlink()
    assert json.loads((out_dir / "config.json").read_text())["architectures"] == [fm.architecture]
    return out_dir


#: the agent's own template, saved into final_model (in both places): never used
AGENT_TEMPLATE = "{{ bos_token }}AGENT TEMPLATE {% for m in messages %}{{ m.content }}{% endfor %}"


def swap_template(model_dir: Path) -> None:
    """What an agent may do: save another template with the model it hands in."""
    (model_dir / "chat_template.jinja").write_text(AGENT_TEMPLATE)
    cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    (model_dir / "tokenizer_config.json").write_text(json.dumps({**cfg, "chat_template": AGENT_TEMPLATE}))
