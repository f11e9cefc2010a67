"""PostTrainBench v1.2's final evaluation as pure rules (ptb_scorer.seeds, and the harness's
plan of attempts, ptb_harness.stages.seed_plan), against hand-computed tables."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ptb_harness.stages.seed_plan import SeedPlan
from ptb_scorer.protocol import AttemptLog, seed_output
from ptb_scorer.seeds import (
    FINAL_EVAL_SEEDS,
    SeedScore,
    combine,
    default_temperature,
    is_greedy,
    model_temperature,
    request_seed,
    seeds_for,
)

# -- each request's seed ------------------------------------------------------------------------
# By hand: sha256("72332:gsm8k_3f9e849d:1:0") begins 43 f5 b4 6a; read little-endian that is
# 0x6ab4f543 = 1790244163, whose top bit is clear. "...:1:1" begins 14 b6 66 9d: 0x9d66b614 =
# 2640754196, and the mask 0x7FFFFFFF clears its top bit: 0x1d66b614 = 493270548.
REQUEST_SEEDS = [
    ((72332, "gsm8k_3f9e849d", 1, 0), "43f5b46a", 1790244163),
    ((72332, "gsm8k_3f9e849d", 1, 1), "14b6669d", 493270548),  # the next call of the same sample
    ((72332, "gsm8k_3f9e849d", 2, 0), "d96d697c", 2087284185),  # another epoch
    ((87681, "gsm8k_3f9e849d", 1, 0), "68c95a8b", 190499176),  # another run seed (top bit masked)
    ((13818, 7, 1, 0), "896470fe", 2121294985),  # an integer sample id, as str() writes it
    ((0, 0, 1, 0), "f40bd2c3", 1137839092),
]


@pytest.mark.parametrize(("args", "head", "expected"), REQUEST_SEEDS)
def test_request_seed_is_upstreams_hash(args, head, expected):
    assert int.from_bytes(bytes.fromhex(head), "little") & 0x7FFFFFFF == expected  # the hand computation
    assert request_seed(*args) == expected


def test_the_default_seeds_are_upstreams():
    assert FINAL_EVAL_SEEDS == (72332, 87681, 38992, 92201, 13818)


# -- the greedy rule ----------------------------------------------------------------------------
TEMPERATURES = [
    # (generation_config.json, config.json, temperature, greedy)
    ({"temperature": 0.6, "top_p": 0.95}, None, 0.6, False),
    ({"temperature": 0}, None, 0.0, True),
    ({"temperature": 0.000009}, None, 0.000009, True),  # below vLLM's _SAMPLING_EPS (1e-5)
    ({"temperature": 0.00001}, None, 0.00001, False),  # at it: samples
    ({"do_sample": False}, None, 1.0, False),  # no temperature: vLLM's 1.0 (do_sample is not read)
    ({"temperature": None}, None, 1.0, False),
    (None, None, 1.0, False),  # no generation config at all
    (None, {"temperature": 0.0}, 0.0, True),  # without generation_config.json, config.json's
    ({"top_k": 20}, {"temperature": 0.0}, 1.0, False),  # with it, config.json is not read
    ({"temperature": "0.7"}, None, None, False),  # unreadable: unknown, every seed
    ({"temperature": -1}, None, None, False),
    ({"temperature": True}, None, None, False),
    ([0.7], None, None, False),
]


@pytest.mark.parametrize(("generation", "config", "temperature", "greedy"), TEMPERATURES)
def test_greedy_rule(generation, config, temperature, greedy):
    assert default_temperature(generation, config) == temperature
    assert is_greedy(default_temperature(generation, config)) is greedy


def test_model_temperature_reads_the_agents_files_bounded_and_without_links(tmp_path):
    def model(name: str, files: dict[str, object]) -> Path:
        d = tmp_path / name
        d.mkdir()
        for f, content in files.items():
            (d / f).write_text(content if isinstance(content, str) else json.dumps(content))
        return d

    assert model_temperature(model("sampling", {"generation_config.json": {"temperature": 0.7}})) == 0.7
    assert model_temperature(model("greedy_config", {"config.json": {"temperature": 0}})) == 0.0
    assert model_temperature(model("none", {"config.json": {"architectures": ["X"]}})) == 1.0
    assert model_temperature(model("broken", {"generation_config.json": "{not json"})) is None
    assert model_temperature(model("huge", {"generation_config.json": " " * (1 << 20) + "{}"})) is None
    linked = model("linked", {})
    os.symlink(tmp_path / "sampling" / "generation_config.json", linked / "generation_config.json")
    assert model_temperature(linked) is None  # a link is not followed: unknown, every seed
    fifo = model("fifo", {})
    os.mkfifo(fifo / "generation_config.json")
    assert model_temperature(fifo) is None  # never waited on


# -- seeds per task -----------------------------------------------------------------------------
SEEDS = (72332, 87681, 38992, 92201, 13818)
POLICIES = [
    ("first", False, SEEDS[:1]),  # arenahardwriting, healthbench: paid grading
    ("first", True, SEEDS[:1]),
    ("all", False, SEEDS),  # gpqamain: the seed also shuffles the choices
    ("all", True, SEEDS),
    ("unless_greedy", False, SEEDS),  # aime2025, aime2026, gsm8k, humaneval, bfcl
    ("unless_greedy", True, SEEDS[:1]),
]


@pytest.mark.parametrize(("policy", "greedy", "expected"), POLICIES)
def test_seeds_per_task(policy, greedy, expected):
    assert seeds_for(policy, SEEDS, greedy) == expected


def test_the_real_tasks_declare_upstreams_seed_counts():
    from conftest import REPO

    from ptb_harness.campaign.tasks import load_task

    policies = {t: load_task(REPO / "tasks" / t).seed_policy for t in os.listdir(REPO / "tasks") if "." not in t}
    assert policies == {
        "aime2025": "unless_greedy",
        "aime2026": "unless_greedy",
        "gsm8k": "unless_greedy",
        "humaneval": "unless_greedy",
        "bfcl": "unless_greedy",
        "gpqamain": "all",
        "arenahardwriting": "first",
        "healthbench": "first",
        "arith": None,  # the demo's own scorer: one unseeded run
    }


# -- metrics.json of the seeds ------------------------------------------------------------------
def test_combination_is_the_mean_over_the_seeds_that_scored():
    a = {"accuracy": 0.5, "stderr": 0.1, "n_examples": 4, "engine": "hf", "log": "a.json", "metrics": {"x": 1}}
    b = {"accuracy": 0.75, "stderr": 0.2, "n_examples": 4, "engine": "hf", "log": "b.json", "metrics": {"x": 2}}
    c = {**a, "accuracy": 1.0, "only_here": 3, "num_seeds": 99}
    out = combine({87681: SeedScore(1, b), 72332: SeedScore(0, a), 13818: SeedScore(2, c)}, 5)
    assert out["accuracy"] == pytest.approx((0.5 + 0.75 + 1.0) / 3)
    assert out["stderr"] == pytest.approx((0.1 + 0.2 + 0.1) / 3)  # averaged, not recomputed
    assert out["n_examples"] == 4 and isinstance(out["n_examples"], int)  # the same in every seed: as is
    assert out["engine"] == "hf"  # not a number, the same in every seed: kept
    assert "log" not in out and "metrics" not in out  # not numbers and not the same: per seed only
    assert "only_here" not in out  # not in every seed
    assert (out["num_seeds"], out["num_seeds_succeeded"]) == (5, 3)  # the seeds' own num_seeds does not count
    assert list(out["per_seed"]) == ["87681", "72332", "13818"]
    assert out["per_seed"]["87681"] == {"max_tokens_stage": 1, "metrics": b}
    assert out["per_seed"]["13818"]["metrics"]["only_here"] == 3


def test_combination_of_one_seed_is_that_seed():
    a = {"accuracy": 0.25, "stderr": 0.05}
    assert combine({72332: SeedScore(0, a)}, 1) == {
        **a,
        "num_seeds": 1,
        "num_seeds_succeeded": 1,
        "per_seed": {"72332": {"max_tokens_stage": 0, "metrics": a}},
    }


@pytest.mark.parametrize(
    ("scores", "num_seeds", "error"),
    [({}, 5, "no seed succeeded"), ({1: SeedScore(0, {"accuracy": 1.0})}, 0, "1 seeds succeeded of 0")],
)
def test_combination_refuses_what_is_not_a_result(scores, num_seeds, error):
    with pytest.raises(ValueError, match=error):
        combine(scores, num_seeds)


# -- the plan of attempts: the ladder per seed ---------------------------------------------------
#: upstream's ladder: 4 attempts at the first cap, 3 at the second, 2 at the third
STEPS = [(0, 4000)] * 4 + [(1, 3000)] * 3 + [(2, 2000)] * 2


def climb(seeds: tuple[int, ...], scores: Callable[[int, int, int | None], bool], scorer_writes_all: bool = False):
    """The plan driven to its end: ``scores(attempt, seed, cap)`` says whether the seed
    scores in that attempt. The scorer stops at the first seed's failure in a gated attempt
    (unless ``scorer_writes_all``, a scorer that ignores the gate)."""
    plan, runs = SeedPlan(STEPS, seeds), []
    while (step := plan.next()) is not None:
        n = len(runs) + 1
        runs.append((step.cap, step.seeds, step.gated))
        scored, why = {}, {}
        for i, seed in enumerate(step.seeds):
            if scores(n, seed, step.cap):
                scored[seed] = {"accuracy": seed / 100_000}
            else:
                why[seed] = f"failed in attempt {n}"
                if i == 0 and step.gated and not scorer_writes_all:
                    break
        plan.record(n, step, scored, why)
    return plan, runs


def test_every_seed_in_the_first_attempt_is_one_attempt():
    plan, runs = climb(SEEDS, lambda n, s, cap: True)
    assert runs == [(4000, SEEDS, True)]
    assert [(s.stage, plan.scored_in[seed]) for seed, s in plan.ordered_scores().items()] == [(0, 1)] * 5


def test_later_seeds_start_at_the_stage_where_the_first_succeeded():
    # the first seed fails at 4000 (4 attempts), scores at the first 3000; seed 2 scores with
    # it; seed 3 fails twice more at 3000, then scores at 2000; seeds 4 and 5 never score
    def scores(n, seed, cap):
        return seed == 72332 and n == 5 or seed == 87681 and n >= 5 or seed == 38992 and cap == 2000

    plan, runs = climb(SEEDS, scores)
    caps = [cap for cap, _, _ in runs]
    # seeds 3-5: their first try at 3000 was attempt 5 (the first's), then 2 more at 3000, 2 at 2000
    assert caps == [4000] * 4 + [3000] * 3 + [2000] * 2
    assert [g for _, _, g in runs] == [True] * 5 + [False] * 4
    assert runs[5][1] == (38992, 92201, 13818) and runs[7][1] == (38992, 92201, 13818)
    assert runs[8][1] == (92201, 13818)
    summary = plan.summary()
    assert summary["72332"] == {"status": "scored", "attempt": 5, "max_tokens_stage": 1, "accuracy": 0.72332}
    assert summary["87681"]["max_tokens_stage"] == 1 and summary["38992"]["max_tokens_stage"] == 2
    assert summary["92201"] == {"status": "failed", "problem": "failed in attempt 9"}  # left out of the mean
    out = combine(plan.ordered_scores(), len(plan.seeds))
    assert out["num_seeds_succeeded"] == 3 and out["accuracy"] == pytest.approx((0.72332 + 0.87681 + 0.38992) / 3)


def test_first_success_late_in_a_stage_still_gives_the_others_the_whole_stage():
    # the first seed scores at the third 4000 attempt; seed 2 fails there: it gets 3 more at
    # 4000 (a whole stage), then 3 and 2, as upstream's ladder from stage 0 gives it
    plan, runs = climb(SEEDS[:2], lambda n, s, cap: s == 72332 and n == 3)
    assert [cap for cap, _, _ in runs] == [4000] * 3 + [4000] * 3 + [3000] * 3 + [2000] * 2
    assert plan.summary()["87681"]["status"] == "failed"


def test_first_seed_failing_everywhere_leaves_no_score_and_the_others_never_ran():
    plan, runs = climb(SEEDS, lambda n, s, cap: s != 72332)
    assert [cap for cap, _, _ in runs] == [cap for _, cap in STEPS] and all(g for _, _, g in runs)
    assert not plan.first_scored and plan.scores == {}
    summary = plan.summary()
    assert summary["72332"] == {"status": "failed", "problem": "failed in attempt 9"}
    assert summary["87681"] == {"status": "not run", "problem": "the first seed (72332) never scored"}


def test_a_scorer_that_ignores_the_gate_scores_nothing_before_the_first_seed():
    plan, runs = climb(SEEDS, lambda n, s, cap: s != 72332 or n == 2, scorer_writes_all=True)
    # attempt 1: the others' metrics (written although the first failed) do not count
    assert plan.scored_in == dict.fromkeys(SEEDS, 2) and len(runs) == 2


def test_one_seed_is_the_plain_ladder():
    plan, runs = climb(SEEDS[:1], lambda n, s, cap: n == 6)
    assert [cap for cap, _, _ in runs] == [4000] * 4 + [3000] * 2 and plan.summary()["72332"]["attempt"] == 6


# -- the protocol's seed lines ------------------------------------------------------------------
def test_attempt_log_counts_loads_and_names_seed_failures():
    head = (
        "t PTB_SCORER_INFO {}\nt PTB_MODEL_LOADED n=1 backend=hf seconds=1.20\n"
        "t PTB_SEED_SCORED 72332 accuracy=0.5\nt PTB_SEED_FAILED: 87681: EngineFailed: out of memory\n"
    )
    log = AttemptLog(head, head)  # a short log: its head and its tail are the same lines
    assert log.model_loads == 1 and log.seed_failures == {87681: "EngineFailed: out of memory"}
    assert AttemptLog(head, "t PTB_MODEL_LOADED n=2 backend=hf seconds=1.0\n").model_loads == 2
    assert AttemptLog("", "").model_loads == 0
    assert seed_output("/t/metrics.attempt-3.json", 72332) == Path("/t/metrics.attempt-3.seed-72332.json")
