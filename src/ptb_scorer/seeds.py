"""PostTrainBench v1.2's final evaluation, as pure rules: the fixed seeds, each request's
seed, the greedy rule, how many seeds a task uses, and how the seeds' metrics combine
into one metrics.json. The scorer (which runs the seeds) and the harness (which plans
them and writes metrics.json) both use these; nothing here imports inspect or torch.

Upstream's sources (aisa-group/PostTrainBench): ``src/eval/run_final_eval.sh`` (the seeds,
the per-task counts, the ladder per seed), ``src/eval/per_sample_seed.py`` (each
request's seed), ``src/utils/default_temperature.py`` (the greedy rule) and
``src/utils/aggregate_seed_metrics.py`` (the combination).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: run_final_eval.sh's FINAL_EVAL_SEEDS
FINAL_EVAL_SEEDS: tuple[int, ...] = (72332, 87681, 38992, 92201, 13818)

#: vLLM's temperature for a request that sets none, when the model's generation config
#: names none (ChatCompletionRequest's default sampling params)
DEFAULT_TEMPERATURE = 1.0
#: vLLM's _SAMPLING_EPS: a temperature below it decodes greedily
SAMPLING_EPS = 1e-5

#: How many of the campaign's seeds a task uses (info.json ``evaluate.seed_policy``):
#: ``first``: the first only (upstream: the grader-scored tasks, whose grading is paid);
#: ``all``: every seed, greedy or not (upstream: gpqamain, whose seed also shuffles the
#: choices); ``unless_greedy``: every seed, or the first only when the model decodes
#: greedily (upstream: aime2025, gsm8k, humaneval).
SEED_POLICIES = ("first", "all", "unless_greedy")

#: metrics.json keys of the combination, never a seed's metric
RESERVED_KEYS = ("num_seeds", "num_seeds_succeeded", "per_seed")

#: what of a model's generation_config.json / config.json is read (they are the agent's files)
MAX_CONFIG_BYTES = 1 << 20


def request_seed(run_seed: int, sample_id: str | int, epoch: int = 1, call: int = 0) -> int:
    """The generation seed of one request (per_sample_seed.sample_seed): the first 4
    bytes, little-endian, of sha256("run_seed:sample_id:epoch:call"), as 31 bits. One seed
    on every request would give every sample the same noise (upstream saw every gsm8k
    answer of a seed collapse into one)."""
    digest = hashlib.sha256(f"{run_seed}:{sample_id}:{epoch}:{call}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def default_temperature(generation_config: Any, config: Any = None) -> float | None:
    """The temperature vLLM samples a request that sets none with (vLLM's
    ``--generation-config auto``): generation_config.json's when the model has that file
    (``generation_config``: its parsed JSON), else config.json's, else 1.0. None when it
    cannot be read (not an object, a temperature that is no number >= 0): upstream then
    evaluates every seed."""
    source = generation_config if generation_config is not None else config
    if source is None:
        return DEFAULT_TEMPERATURE
    if not isinstance(source, dict):
        return None
    value = source.get("temperature")
    if value is None:
        return DEFAULT_TEMPERATURE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def is_greedy(temperature: float | None) -> bool:
    """Whether vLLM decodes greedily at this temperature (unknown: no)."""
    return temperature is not None and temperature < SAMPLING_EPS


def _read_json(path: Path) -> tuple[bool, Any]:
    """(the file exists, its JSON or None when unreadable): no link followed, no FIFO
    waited on, at most MAX_CONFIG_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return False, None
    except OSError:
        return True, None
    with os.fdopen(fd, "rb") as f:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return True, None
            data = f.read(MAX_CONFIG_BYTES + 1)
        except OSError:
            return True, None
    if len(data) > MAX_CONFIG_BYTES:
        return True, None
    try:
        return True, json.loads(data)
    except ValueError:
        return True, None


def model_temperature(model_dir: Path) -> float | None:
    """:func:`default_temperature` of a model directory (read bounded, no link followed)."""
    exists, generation_config = _read_json(Path(model_dir) / "generation_config.json")
    if exists:  # vLLM reads config.json only without this file; unreadable: unknown
        return None if generation_config is None else default_temperature(generation_config)
    _, config = _read_json(Path(model_dir) / "config.json")
    return default_temperature(None, config if isinstance(config, dict) else None)


def seeds_for(policy: str, seeds: Sequence[int], greedy: bool) -> tuple[int, ...]:
    """The seeds a task evaluates with (``policy``: one of SEED_POLICIES), in order."""
    if policy not in SEED_POLICIES:
        raise ValueError(f"seed policy {policy!r}: one of {', '.join(SEED_POLICIES)}")
    if not seeds:
        raise ValueError("no seeds")
    if policy == "first" or (policy == "unless_greedy" and greedy):
        return (seeds[0],)
    return tuple(seeds)


@dataclass(frozen=True)
class SeedScore:
    """A seed that succeeded: the ladder stage of its metrics (0 = the first) and the metrics."""

    stage: int
    metrics: Mapping[str, Any]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _combined(values: list[Any]) -> tuple[bool, Any]:
    """(kept, value) of one top-level key over the seeds: numbers are averaged (all equal:
    kept as they are), other values kept when every seed has the same."""
    if all(_number(v) for v in values):
        if all(v == values[0] for v in values):
            return True, values[0]
        return True, sum(values) / len(values)
    if all(json.dumps(v, sort_keys=True) == json.dumps(values[0], sort_keys=True) for v in values):
        return True, values[0]
    return False, None


def combine(scores: Mapping[int, SeedScore], num_seeds: int) -> dict[str, Any]:
    """metrics.json of a multi-seed evaluation (aggregate_seed_metrics.py): the mean of
    every numeric top-level key over the seeds that succeeded (stderr averaged, not
    recomputed), plus ``num_seeds`` (the seeds evaluated, succeeded or not),
    ``num_seeds_succeeded`` and ``per_seed: {seed: {max_tokens_stage, metrics}}``.
    Beyond upstream: a key that is not a number in every seed stays at the top when every
    seed has the same value (what the attempt ran with: engine, chat template, matcher),
    else only under per_seed, as does a key some seed lacks (upstream raises on both)."""
    if not scores:
        raise ValueError("no seed succeeded: no metrics")
    if len(scores) > num_seeds:
        raise ValueError(f"{len(scores)} seeds succeeded of {num_seeds}")
    metrics = [s.metrics for s in scores.values()]
    out: dict[str, Any] = {}
    for key in metrics[0]:
        if key in RESERVED_KEYS or any(key not in m for m in metrics):
            continue
        kept, value = _combined([m[key] for m in metrics])
        if kept:
            out[key] = value
    if not _number(out.get("accuracy")):
        raise ValueError("no numeric 'accuracy' in every seed's metrics")
    out.update(
        num_seeds=num_seeds,
        num_seeds_succeeded=len(scores),
        per_seed={str(seed): {"max_tokens_stage": s.stage, "metrics": dict(s.metrics)} for seed, s in scores.items()},
    )
    return out
