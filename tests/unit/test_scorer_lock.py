"""The scorer lock is one place and exact: the requirement files, the image that installs
them, the environment the tests run in, and the tasks' data ids (against inspect_evals
at the pinned version) and ladders (as upstream PostTrainBench's)."""

from __future__ import annotations

import importlib.metadata
import json
import re

import pytest
from conftest import REPO

LOCK = REPO / "tasks" / "requirements-scorer.txt"
GPU_LOCK = REPO / "tasks" / "requirements-scorer-gpu.txt"
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([0-9][0-9A-Za-z.+-]*)$")


def pins(path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line or line.startswith("-r "):
            continue
        m = PIN.match(line)
        assert m, f"{path.name}: {line!r} is not an exact pin"
        out[m.group(1).lower()] = m.group(2)
    return out


def test_lock_pins_the_engine_exactly():
    lock = pins(LOCK)
    assert {"inspect_ai", "inspect_evals", "datasets", "accelerate", "openai"} <= set(lock)
    gpu = pins(GPU_LOCK)
    assert set(gpu) == {"vllm", "torch", "transformers"} and "-r requirements-scorer.txt" in GPU_LOCK.read_text()


def test_the_tests_run_on_the_locked_versions():
    for name, version in pins(LOCK).items():
        assert importlib.metadata.version(name) == version, f"{name}: installed != {LOCK.name}"


def test_scorer_image_installs_exactly_the_lock():
    text = (REPO / "containers" / "scorer.def").read_text()
    assert "tasks/requirements-scorer.txt /opt/scorer/requirements-scorer.txt" in text
    assert "tasks/requirements-scorer-gpu.txt /opt/scorer/requirements-scorer-gpu.txt" in text
    installs = re.findall(r"pip install ([^\n]+)", text)
    assert installs == [
        "--no-cache-dir --upgrade pip==25.3",
        "--no-cache-dir -r /opt/scorer/requirements-scorer-gpu.txt",
    ]
    assert re.search(r"^From: nvidia/cuda:\S+$", text, re.M)


TASKS = {  # task: (agent-side default limit, first cap)
    "gsm8k": (150, 4000),
    "humaneval": (150, 4000),
    "gpqamain": (50, 16000),
    "aime2025": (-1, 16000),
    "aime2026": (-1, 16000),
    "bfcl": (-1, 16000),
    "arenahardwriting": (32, 16384),
    "healthbench": (32, 16384),
}


@pytest.mark.parametrize("task", TASKS)
def test_ladder_and_limits_as_upstream(task):
    info = json.loads((REPO / "tasks" / task / "info.json").read_text())
    limit, cap = TASKS[task]
    ladder = info["evaluate"]["ladder"]
    assert [s["attempts"] for s in ladder] == [4, 3, 2]
    assert [s["max_tokens"] for s in ladder] == [cap, cap * 3 // 4, cap // 2]
    assert info["evaluate"]["extra_args"][:2] == ["--limit", "-1"] and info["agent_default_limit"] == limit
    # evaluate.py takes its defaults from info.json (the agent-side limit, the first cap)
    from ptb_scorer.task_info import TaskInfo

    defaults = TaskInfo.read(REPO / "tasks" / task / "info.json")
    assert (defaults.default_limit, defaults.default_max_tokens) == (limit, cap)
    assert f'run("{task}")' in (REPO / "tasks" / task / "evaluate.py").read_text()


def _datasets(task):
    return json.loads((REPO / "tasks" / task / "info.json").read_text())["datasets"]


def test_dataset_ids_and_revisions_are_inspect_evals_own():
    from inspect_evals.aime2025 import aime2025 as aime_mod
    from inspect_evals.aime2026 import aime2026 as aime26_mod
    from inspect_evals.gsm8k import gsm8k as gsm_mod
    from inspect_evals.humaneval import humaneval as he_mod

    mods = (aime_mod, aime26_mod, gsm_mod, he_mod)
    aime_mod, aime26_mod, gsm_mod, he_mod = (__import__(m.__module__, fromlist=["x"]) for m in mods)
    (g,) = _datasets("gsm8k")
    assert (g["path"], g["data_dir"], g["revision"]) == (gsm_mod.DATASET_PATH, "main", gsm_mod.GSM8K_DATASET_REVISION)
    (h,) = _datasets("humaneval")
    assert (h["path"], h["revision"]) == (he_mod.DATASET_PATH, he_mod.HUMANEVAL_DATASET_REVISION)
    (a,) = _datasets("aime2025")
    assert (a["path"], a["revision"]) == (aime_mod.DATASET_PATH, aime_mod.AIME2025_DATASET_REVISION)
    (a26,) = _datasets("aime2026")
    assert (a26["path"], a26["revision"]) == (aime26_mod.DATASET_PATH, aime26_mod.AIME2026_DATASET_REVISION)
    (q,) = _datasets("gpqamain")
    assert (q["path"], q["name"], q["gated"]) == ("Idavidrein/gpqa", "gpqa_main", True)


def test_bfcl_files_are_where_inspect_evals_reads_them():
    from inspect_evals.bfcl import bfcl as bfcl_fn
    from inspect_evals.bfcl.utils.task_categories import CATEGORIES, FILENAME_PREFIX, FILENAME_SUFFIX

    bfcl_mod = __import__(bfcl_fn.__module__, fromlist=["x"])
    (b,) = _datasets("bfcl")
    exec_simple = CATEGORIES["exec_simple"]
    assert b["files"] == [
        f"BFCL/{FILENAME_PREFIX}simple_python{FILENAME_SUFFIX}",  # inspect_evals' "already downloaded" check
        f"BFCL/{exec_simple.filename}",
        f"BFCL/{exec_simple.ground_truth_filename}",
    ]
    assert bfcl_mod.BFCL_GITHUB_COMMIT in b["source"]
