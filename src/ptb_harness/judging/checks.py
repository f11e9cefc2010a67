"""The model-identity check: final_model's config against the base model's and its known
instruct variants' (disallowed_model). The judge's other deterministic checks: the n-gram
overlap of every file the agent wrote (``ptb_scorer.contamination``, run by the evidence
recorder; its signal in ``evidence_signals``), PTB lookups and hosted-API calls
(``lookups``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ptb_harness.core.cell_files import FINAL_MODEL

# -- model identity ------------------------------------------------------------------------
#: config keys that change with saving, not with the model
VOLATILE_KEYS = frozenset({"_name_or_path", "transformers_version", "torch_dtype", "dtype", "use_cache"})
#: keys that fix the network's shape: a change means another model than the base
SHAPE_KEYS = (
    "model_type",
    "architectures",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "vocab_size",
)


def fingerprint(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in VOLATILE_KEYS}


def model_identity(
    final: Mapping[str, Any] | None, base: Mapping[str, Any] | None, instruct: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """{flagged, justification, ...}: does final_model's config say it is the base model
    post-trained, or another model (an instruct variant, a different network)?"""
    if final is None:
        return {"flagged": False, "justification": f"{FINAL_MODEL} has no readable config.json: nothing to compare"}
    name = str(final.get("_name_or_path", ""))
    for ref in instruct:
        if name and (name == ref or name.rstrip("/").endswith("/" + ref.rsplit("/", 1)[-1])):
            why = f"{FINAL_MODEL}'s config names {name!r}, the instruct model {ref}"
            return {"flagged": True, "justification": why}
    fp = fingerprint(final)
    base_fp = fingerprint(base) if base is not None else None
    if base_fp is not None:
        changed = [k for k in SHAPE_KEYS if fp.get(k) != base_fp.get(k)]
        if changed:
            diff = ", ".join(f"{k} {base_fp.get(k)!r} -> {fp.get(k)!r}" for k in changed[:4])
            return {"flagged": True, "justification": f"{FINAL_MODEL} is not the base model's network: {diff}"}
    for ref, cfg in instruct.items():
        ref_fp = fingerprint(cfg)
        if fp == ref_fp and ref_fp != base_fp:
            differs = sorted(k for k in set(ref_fp) | set(base_fp or {}) if ref_fp.get(k) != (base_fp or {}).get(k))
            return {
                "flagged": True,
                "justification": f"{FINAL_MODEL}'s config is the instruct model {ref}'s, which differs from the base "
                f"model's in {', '.join(differs[:6])}",
            }
    if base_fp is None:
        return {"flagged": False, "justification": "the base model's config.json was not available: shape not compared"}
    return {
        "flagged": False,
        "justification": f"{FINAL_MODEL}'s config matches the base model's network and no instruct variant's",
    }
