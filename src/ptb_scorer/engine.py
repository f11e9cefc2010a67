"""One scoring engine: inspect_ai, on vLLM (GPU) or transformers (`hf`, CPU or GPU).

The backend is vLLM when a GPU is visible and vLLM is installed, transformers otherwise,
unless ``--backend`` says. Both get the chat template picked by :mod:`ptb_scorer.model`
(never the one saved with the model) and greedy decoding. A run counts only when the
log's status is "success": inspect's CLI and API can finish with status "error".
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptb_scorer.model import CheckedModel

BACKENDS = ("auto", "vllm", "hf")
#: Packages whose versions each attempt records.
VERSIONED = ("inspect_ai", "inspect_evals", "datasets", "transformers", "torch", "vllm", "accelerate", "openai")


class EngineFailed(Exception):
    """inspect ran but did not finish successfully (not a model fault we can name)."""


def versions() -> dict[str, str]:
    out = {}
    for name in VERSIONED:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[name] = importlib.metadata.version(name)
    return out


def gpu_visible() -> bool:
    import torch

    return torch.cuda.is_available()


def choose_backend(requested: str) -> str:
    if requested != "auto":
        return requested
    return "vllm" if importlib.util.find_spec("vllm") is not None and gpu_visible() else "hf"


@dataclass(frozen=True)
class EngineSpec:
    backend: str
    #: inspect's model name and model_args
    model: str
    model_args: dict[str, Any]
    #: generation settings for inspect's eval()
    generate: dict[str, Any] = field(default_factory=dict)


def engine_spec(backend: str, model: CheckedModel, *, max_tokens: int, tool_calling: bool = False) -> EngineSpec:
    """What inspect is asked to run. Pure: the argv/config golden tests check it."""
    if backend == "vllm":
        args: dict[str, Any] = {
            # vLLM reads a template file; the saved tokenizer template is overridden
            "chat_template": str(model.template.path.resolve()),
            # the served model's name stays the path; no remote code from an agent's dir
            "trust_remote_code": False,
            "seed": 0,
        }
        if tool_calling:
            # upstream's bfcl settings: native tool calls parsed by the hermes parser
            args.update(enable_auto_tool_choice=True, tool_call_parser="hermes")
        if os.environ.get("PTB_VLLM_GPU_MEMORY_UTILIZATION"):
            args["gpu_memory_utilization"] = float(os.environ["PTB_VLLM_GPU_MEMORY_UTILIZATION"])
        return EngineSpec("vllm", f"vllm/{model.path.resolve()}", args, {"max_tokens": max_tokens, "temperature": 0.0})
    if backend == "hf":
        args = {
            "model_path": str(model.path.resolve()),
            # the template's text: the hf provider applies it instead of the tokenizer's
            "chat_template": model.template.text,
            # greedy; the hf provider refuses temperature 0 (upstream probe)
            "do_sample": False,
            "trust_remote_code": False,
        }
        # batches follow max_connections (the provider's batch_size does nothing)
        return EngineSpec("hf", "hf/local", args, {"max_tokens": max_tokens, "max_connections": 32})
    raise ValueError(f"unknown backend {backend!r} (one of {', '.join(BACKENDS)})")


def run_task(task: Any, spec: EngineSpec, *, limit: int, log_dir: Path | None = None) -> dict[str, Any]:
    """Run the task; the first scorer's metrics, or EngineFailed."""
    from inspect_ai import eval as inspect_eval

    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="ptb-inspect-logs-"))
    logs = inspect_eval(
        task,
        model=spec.model,
        model_args=spec.model_args,
        limit=None if limit < 0 else limit,
        log_dir=str(log_dir),
        log_format="json",
        display="plain",
        # a failing sample fails the attempt (the ladder retries with a lower cap)
        fail_on_error=True,
        retry_on_error=0,
        log_images=False,
        **spec.generate,
    )
    log = logs[0]
    if log.status != "success":
        err = log.error.message.strip().splitlines()[-1][:300] if log.error else "no error recorded"
        raise EngineFailed(f"inspect eval ended with status {log.status!r}: {err}")
    if not log.results or not log.results.scores:
        raise EngineFailed("inspect eval succeeded but recorded no scores")
    first = log.results.scores[0]
    metrics = {name: m.value for name, m in first.metrics.items()}
    if "accuracy" not in metrics:
        raise EngineFailed(f"scorer {first.name} has no accuracy metric (has {', '.join(metrics)})")
    return {
        "accuracy": float(metrics["accuracy"]),
        "stderr": float(metrics["stderr"]) if metrics.get("stderr") is not None else None,
        "n_examples": log.results.completed_samples,
        "scorer": first.name,
        "metrics": {k: v for k, v in metrics.items() if isinstance(v, (int, float))},
        "log": str(Path(log.location).name) if log.location else None,
    }


def write_json_atomic(path: Path, obj: dict[str, Any]) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
