"""One scoring engine: inspect_ai, on vLLM (GPU) or transformers (`hf`, CPU or GPU).

The backend is vLLM when a GPU is visible and vLLM is installed, transformers otherwise,
unless ``--backend`` says. Both render prompts with the chat template the harness chose
(:mod:`ptb_scorer.chat_template`: the base model's, never the one saved with the final
model) and its variables, the same way (vLLM renders server-side; the transformers
backend through :mod:`ptb_scorer.hf_backend`, as vLLM would), BOS once.

Decoding is PostTrainBench v1.2's: no temperature is set, so the model's own generation
config decides (vLLM's ``--generation-config auto``; transformers' ``generate`` reads the
same file), greedy below vLLM's sampling epsilon (:mod:`ptb_scorer.seeds`). A run with a
run seed gives each request its own seed (:func:`seeded`). The model is loaded once
(:func:`load_model`: one transformers model or one vLLM server) and serves every seed of
an attempt.

A run counts only when the log's status is "success": inspect's CLI and API can finish
with status "error".
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptb_scorer.chat_template import ChatTemplate
from ptb_scorer.model import CheckedModel
from ptb_scorer.protocol import SDPA_KERNELS_ENV, emit_model_loaded
from ptb_scorer.seeds import request_seed

BACKENDS = ("auto", "vllm", "hf")
#: PyTorch's scaled-dot-product attention kernels (torch.backends.cuda), by the names the
#: campaign uses (evaluate.sdpa_kernels)
SDPA_KERNELS = ("flash", "efficient", "math", "cudnn")
#: Those the transformers backend may use unless the campaign says: not cudnn. PyTorch keeps
#: cuDNN attention's plans in a per-thread cache keyed by the exact shape, the KV length
#: included, so each decoded token misses it and compiles a plan (40-60 ms of CPU a token
#: on an H200, against a GPU time equal to flash's; issue 35).
DEFAULT_SDPA_KERNELS = ("flash", "efficient", "math")
#: Packages whose versions each attempt records.
VERSIONED = ("inspect_ai", "inspect_evals", "datasets", "transformers", "torch", "vllm", "accelerate", "openai")


class EngineFailed(Exception):
    """inspect ran but did not finish successfully (not a model fault we can name)."""


class EngineSettingInvalid(ValueError):
    """A setting the harness handed the engine is not one it knows (one line, no traceback)."""


def versions() -> dict[str, str]:
    out = {}
    for name in VERSIONED:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[name] = importlib.metadata.version(name)
    return out


def sdpa_kernels_from_env(env: Mapping[str, str]) -> tuple[str, ...]:
    """The kernels the harness named (SDPA_KERNELS_ENV), or the default;
    EngineSettingInvalid names an unknown one."""
    given = env.get(SDPA_KERNELS_ENV, "").strip()
    if not given:
        return DEFAULT_SDPA_KERNELS
    kernels = tuple(k.strip() for k in given.split(",") if k.strip())
    unknown = [k for k in kernels if k not in SDPA_KERNELS]
    if unknown or not kernels:
        raise EngineSettingInvalid(f"{SDPA_KERNELS_ENV}: {given!r} (kernels: {', '.join(SDPA_KERNELS)})")
    return kernels


def use_sdpa_kernels(kernels: tuple[str, ...]) -> dict[str, Any]:
    """Let PyTorch choose among ``kernels`` alone for every attention of this process (the
    flags are process-wide, whichever thread generates); what is in force, read back."""
    import torch

    cuda = torch.backends.cuda
    cuda.enable_flash_sdp("flash" in kernels)
    cuda.enable_mem_efficient_sdp("efficient" in kernels)
    cuda.enable_math_sdp("math" in kernels)
    cuda.enable_cudnn_sdp("cudnn" in kernels)
    in_force = {
        "flash": cuda.flash_sdp_enabled(),
        "efficient": cuda.mem_efficient_sdp_enabled(),
        "math": cuda.math_sdp_enabled(),
        "cudnn": cuda.cudnn_sdp_enabled(),
    }
    return {"sdpa_kernels": [k for k, on in in_force.items() if on]}


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


def template_file(template: ChatTemplate, directory: Path | None = None) -> Path:
    """The template as a file, for `vllm serve --chat-template` (it reads a path), in a
    directory of its own (a fresh private one unless given)."""
    directory = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="ptb-chat-template-"))
    path = directory / f"chat-template-{template.sha256[:16]}.jinja"
    path.write_text(template.text, encoding="utf-8")
    return path


def engine_spec(
    backend: str,
    model: CheckedModel,
    template: ChatTemplate,
    *,
    template_path: Path,
    max_tokens: int,
    tool_calling: bool = False,
    prompt_log: Path | None = None,
    greedy: bool = False,
) -> EngineSpec:
    """What inspect is asked to run. Pure: the argv/config golden tests check it.
    ``greedy``: the model's own temperature decodes greedily (:func:`ptb_scorer.seeds.is_greedy`);
    vLLM reads it itself, transformers must be told not to sample."""
    if backend == "vllm":
        args: dict[str, Any] = {
            # the server renders every prompt with this file; the final model's template is never read
            "chat_template": str(Path(template_path).resolve()),
            # the served model's name stays the path; no remote code from an agent's dir
            "trust_remote_code": False,
            "seed": 0,
        }
        if tool_calling:
            # native tool calls, parsed in the format the template asks for (chat_template.FAMILIES)
            args.update(enable_auto_tool_choice=True, tool_call_parser=template.tool_parser)
        if os.environ.get("PTB_VLLM_GPU_MEMORY_UTILIZATION"):
            args["gpu_memory_utilization"] = float(os.environ["PTB_VLLM_GPU_MEMORY_UTILIZATION"])
        # no temperature: the server takes the model's generation config, as upstream's does
        generate: dict[str, Any] = {"max_tokens": max_tokens}
        if template.kwargs:
            generate["extra_body"] = {"chat_template_kwargs": dict(template.kwargs)}
        return EngineSpec("vllm", f"vllm/{model.path.resolve()}", args, generate)
    if backend == "hf":
        args = {
            "model_path": str(model.path.resolve()),
            # ptb_hf renders with exactly this template and these variables, as vLLM does
            "chat_template": template.text,
            "chat_template_kwargs": dict(template.kwargs),
            # the template writes BOS where the family has one: the tokenizer adds none
            "tokenizer_call_args": {"add_special_tokens": False},
            # sampling with the model's generation config (its temperature, top_p, top_k), or
            # greedy where that temperature is 0 (generate refuses to sample at 0)
            "do_sample": not greedy,
            "trust_remote_code": False,
        }
        if prompt_log is not None:
            args["prompt_log"] = str(prompt_log)
        # batches follow max_connections (the provider's batch_size does nothing)
        return EngineSpec("hf", "ptb_hf/local", args, {"max_tokens": max_tokens, "max_connections": 32})
    raise ValueError(f"unknown backend {backend!r} (one of {', '.join(BACKENDS)})")


def register(spec: EngineSpec) -> None:
    """Make the spec's inspect provider known (ptb_hf is ours), and no other package's."""
    skip_other_plugins()
    if spec.backend == "hf":
        import ptb_scorer.hf_backend  # noqa: F401  (registers ptb_hf)


def skip_other_plugins() -> None:
    """Keep inspect_ai from loading every installed package's plugins (its ``inspect_ai``
    entry points) when an eval starts: inspect_evals' is a registry that imports each of
    its hundreds of evals and their dependencies, about 0.8 s of CPU at every scorer start,
    for tasks and providers the scorer never looks up by name (``ptb_scorer.tasks``
    imports the ones it builds; ptb_hf registers itself above; vllm and the graders'
    providers are inspect's own). A private flag of the pinned inspect_ai, as
    ``hf_backend``'s hooks are; ``tests/scorer/test_engine_start.py`` fails if it stops working."""
    from inspect_ai._util import entrypoints

    entrypoints._inspect_ai_eps_loaded_all = True


def load_model(spec: EngineSpec) -> Any:
    """The model every seed of the attempt runs on (an inspect Model: for ``hf`` the loaded
    transformers model, for ``vllm`` its started server), announced by one
    PTB_MODEL_LOADED line per load."""
    from inspect_ai.model import get_model

    register(spec)
    started = time.monotonic()
    model = get_model(spec.model, memoize=False, **spec.model_args)
    emit_model_loaded(spec.backend, time.monotonic() - started)
    return model


def seeded(inner: Any, run_seed: int) -> Any:
    """The task's solver with each generate() call seeded by
    :func:`ptb_scorer.seeds.request_seed` (sample id, epoch, the call's index within the
    sample), as upstream's per_sample_seed: one seed on every request would give every
    sample the same noise. A solver that passes a seed of its own is an error."""
    from inspect_ai.solver import Generate, TaskState, solver

    @solver(name="per_request_seed")
    def per_request_seed() -> Any:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            calls = 0

            async def seeded_generate(state: TaskState, *args: Any, **kwargs: Any) -> TaskState:
                nonlocal calls
                if "seed" in kwargs:
                    raise ValueError(f"the task's solver passed a seed of its own ({kwargs['seed']}) to generate()")
                kwargs["seed"] = request_seed(run_seed, state.sample_id, state.epoch, calls)
                calls += 1
                return await generate(state, *args, **kwargs)

            return await inner(state, seeded_generate)  # type: ignore[arg-type]

        return solve

    return per_request_seed()


def run_task(
    task: Any,
    spec: EngineSpec,
    *,
    limit: int,
    model: Any = None,
    run_seed: int | None = None,
    log_dir: Path | None = None,
) -> dict[str, Any]:
    """Run the task on ``model`` (from :func:`load_model`; None: inspect loads one),
    each request seeded from ``run_seed`` when given; the first scorer's metrics, or
    EngineFailed."""
    from inspect_ai import eval as inspect_eval

    register(spec)
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="ptb-inspect-logs-"))
    logs = inspect_eval(
        task,
        model=spec.model if model is None else model,
        model_args=spec.model_args if model is None else {},
        solver=None if run_seed is None else seeded(task.solver, run_seed),
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
    threads: dict[str, Any] = {}
    if spec.backend == "hf":
        from ptb_scorer.hf_backend import generating_threads

        threads["generating_threads"] = generating_threads()  # so far in this process: 1 for every seed
    return {
        **threads,
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
