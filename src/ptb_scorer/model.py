"""A final_model, checked before any engine starts.

Every problem is a :class:`ModelInvalid`: the scorer prints it as one
``PTB_MODEL_INVALID: why`` line, which the harness counts as the agent's failure. The
chat template is never the final model's (see :mod:`ptb_scorer.chat_template`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ptb_scorer.chat_template import same_family

WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")


class ModelInvalid(Exception):
    """The model, not the machine, cannot be scored."""


@dataclass(frozen=True)
class CheckedModel:
    path: Path
    architecture: str


def read_architecture(config_json: Path) -> str:
    try:
        config = json.loads(config_json.read_text())
    except FileNotFoundError:
        raise ModelInvalid(f"{config_json.parent.name}/ has no config.json") from None
    except (OSError, ValueError) as e:
        raise ModelInvalid(f"{config_json.name} is not readable JSON ({e})") from None
    archs = config.get("architectures") if isinstance(config, dict) else None
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise ModelInvalid(f"{config_json.name} names no architecture ('architectures' missing or empty)")
    return archs[0]


def check_model(model_path: Path, base_architecture: str | None = None) -> CheckedModel:
    """Check the files of a final_model.

    ``base_architecture``: the base model's; a final model of another family (another
    model) is invalid. Within a family a different class is accepted (e.g. Gemma 3's
    text-only Gemma3ForCausalLM saved from a Gemma3ForConditionalGeneration base).
    """
    model_path = Path(model_path)
    if not model_path.is_dir():
        raise ModelInvalid(f"final model {model_path} is not a directory")
    arch = read_architecture(model_path / "config.json")
    if base_architecture is not None and not same_family(base_architecture, arch):
        raise ModelInvalid(f"architecture changed from the base model's {base_architecture} to {arch}")
    if not any(next(model_path.glob(p), None) for p in WEIGHT_PATTERNS):
        raise ModelInvalid(f"{model_path.name}/ has no weights (*.safetensors or pytorch_model*.bin)")
    if not any((model_path / f).is_file() for f in TOKENIZER_FILES):
        raise ModelInvalid(f"{model_path.name}/ has no tokenizer ({', '.join(TOKENIZER_FILES)})")
    return CheckedModel(model_path, arch)


def check_loadable(model_path: Path) -> None:
    """Nothing of the model would run as code (ptb_scorer.refusals), and transformers can
    read the config (a model type it knows). Cheap: no weights."""
    from transformers import AutoConfig

    from ptb_scorer.refusals import refusal

    if why := refusal(model_path):
        raise ModelInvalid(why)
    try:
        AutoConfig.from_pretrained(str(model_path))
    except Exception as e:
        why = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        raise ModelInvalid(f"config.json cannot be loaded: {type(e).__name__}: {why}") from None
