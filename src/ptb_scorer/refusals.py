"""What a final model may not ask of the scorer: the scorer runs none of the model's code.

A final model is refused, before any engine starts, when loading it would mean running
code or unpickling data the agent wrote:

- remote code: ``auto_map`` in config.json whose ``model_type`` transformers does not
  know (transformers would need ``trust_remote_code``; with a known type it uses its own
  class and ignores the map), or a tokenizer ``auto_map`` whose ``tokenizer_class`` is
  none of transformers' own;
- pickle weights: ``*.bin``, ``*.pt``, ``*.pth``, ``*.pkl`` or ``*.ckpt`` weights and no
  ``*.safetensors`` (the loaders read pickles only when no safetensors file is there);
- ``custom_generate/``: code that replaces ``generate()`` (transformers runs it only with
  remote code trusted, which the scorer never does).

Each is the agent's failure: the scorer prints it as one ``PTB_MODEL_INVALID: why`` line
and the harness stops the ladder (the model will not change between attempts). Used by
ptb_scorer's tasks (model.check_loadable) and the demo's arith scorer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
#: files beside the weights that are pickles by convention but never loaded as weights
NOT_WEIGHTS = ("training_args.bin", "optimizer.pt", "scheduler.pt", "rng_state.pth", "scaler.pt")
MAX_JSON_BYTES = 4 << 20


def _json(path: Path) -> dict[str, Any]:
    """A small JSON object file, or {} (a missing or broken one is the loaders' to report)."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_JSON_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _known_model_types() -> set[str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return set(CONFIG_MAPPING_NAMES)


def _is_transformers_class(name: Any) -> bool:
    import transformers

    if not isinstance(name, str) or not name.isidentifier():
        return False
    return hasattr(transformers, name) or hasattr(transformers, name.removesuffix("Fast"))


def _remote_code(model: Path) -> str | None:
    config = _json(model / "config.json")
    auto_map = config.get("auto_map")
    if auto_map and config.get("model_type") not in _known_model_types():
        return (
            f"config.json asks for remote code (auto_map {sorted(auto_map)[:3]}) and its model_type "
            f"{str(config.get('model_type'))[:60]!r} is not one transformers knows"
        )
    tok = _json(model / "tokenizer_config.json")
    tok_map = tok.get("auto_map") or (auto_map if isinstance(auto_map, dict) and "AutoTokenizer" in auto_map else None)
    if tok_map and not _is_transformers_class(tok.get("tokenizer_class")):
        return (
            f"the tokenizer asks for remote code (tokenizer auto_map, tokenizer_class "
            f"{str(tok.get('tokenizer_class'))[:60]!r} is none of transformers')"
        )
    return None


def _pickle_weights(model: Path) -> str | None:
    files = [p for p in model.iterdir() if p.is_file()]
    if any(p.suffix == ".safetensors" for p in files):
        return None
    pickles = sorted(p.name for p in files if p.suffix in PICKLE_SUFFIXES and p.name not in NOT_WEIGHTS)
    if pickles:
        shown = ", ".join(pickles[:3]) + (f" (+{len(pickles) - 3})" if len(pickles) > 3 else "")
        return f"weights are pickles ({shown}) and there is no *.safetensors: save with safetensors"
    return None


def refusal(model_dir: Path | str) -> str | None:
    """Why the scorer refuses to load this final model, or None."""
    model = Path(model_dir)
    if not model.is_dir():
        return None  # the model check names a missing dir
    if (model / "custom_generate").exists():
        return "final_model has custom_generate/ (code that would replace generate()); the scorer runs no model code"
    return _remote_code(model) or _pickle_weights(model)
