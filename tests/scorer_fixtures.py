"""Fixture datasets in each benchmark's real schema, placed where the scorer reads them.

A handful of rows per dataset, written as `datasets`' own Arrow cache under an HF home
(``$HF_HOME/datasets/<org>___<name>/<config>/0.0.0/<hash>/``): the layout that
`datasets.load_dataset("openai/gsm8k", data_dir="main")` reads with HF_DATASETS_OFFLINE=1.
So the tasks load them through their real loading code, offline. bfcl's files go where
inspect_evals' bfcl reads them (``$INSPECT_EVALS_CACHE_DIR/BFCL/...``). Used by the tests
and by the H200 run (tests/gpu/device_scorer.sh).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

GSM8K_TRAIN = [
    {
        "question": f"Tom has {i} apples and buys {i + 2} more. How many apples does he have?",
        "answer": f"He has {i} + {i + 2} = <<{i}+{i + 2}={2 * i + 2}>>{2 * i + 2} apples.\n#### {2 * i + 2}",
    }
    for i in range(1, 11)
]  # 10 rows: the task's 10-shot prompt comes from the train split
GSM8K_TEST = [
    {
        "question": "A shop sells 1,200 pens a day. How many pens does it sell in 3 days?",
        "answer": "1,200 * 3 = <<1200*3=3600>>3600\n#### 3,600",
    },
    {"question": "Sam had 5 dollars and spent 8. What is his balance?", "answer": "5 - 8 = -3\n#### -3"},
    {"question": "Half of 7 is?", "answer": "7 / 2 = 3.5\n#### 3.5"},
]
HUMANEVAL_TEST = [
    {
        "task_id": "HumanEval/0",
        "prompt": 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n',
        "canonical_solution": "    return a + b\n",
        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n",
        "entry_point": "add",
    },
    {
        "task_id": "HumanEval/1",
        "prompt": 'def is_even(n: int) -> bool:\n    """True when n is even."""\n',
        "canonical_solution": "    return n % 2 == 0\n",
        "test": "def check(candidate):\n    assert candidate(2)\n    assert not candidate(3)\n",
        "entry_point": "is_even",
    },
]
AIME25_TEST = [
    {"problem": "Find the remainder when 2025 is divided by 1000.", "answer": "25", "id": "0"},
    {"problem": "Compute 6 times 7.", "answer": "42", "id": "1"},
]
AIME26_TEST = [  # math-ai/aime26: id / problem / answer, as aime25
    {"id": "0", "problem": "Find the remainder when 2026 is divided by 1000.", "answer": "26"},
    {"id": "1", "problem": "Compute 27 times 27.", "answer": "729"},
]
GPQA_MAIN_TRAIN = [
    {
        "Pre-Revision Question": "q",
        "Question": f"Which particle carries charge {q}?",
        "Correct Answer": correct,
        "Incorrect Answer 1": "photon",
        "Incorrect Answer 2": "neutrino",
        "Incorrect Answer 3": "gluon",
        "Explanation": "by definition",
        "Record ID": f"rec{i}",
        "High-level domain": "Physics",
        "Subdomain": "High-energy particle physics",
    }
    for i, (q, correct) in enumerate([("-1", "electron"), ("+1", "positron"), ("+1 (baryon)", "proton")])
]
BFCL_EXEC_SIMPLE = [
    {
        "id": "exec_simple_0",
        "question": [[{"role": "user", "content": "What is the probability of 5 heads in 20 fair coin flips?"}]],
        "function": [
            {
                "name": "calc_binomial_probability",
                "description": "Binomial probability.",
                "parameters": {
                    "type": "dict",
                    "properties": {
                        "n": {"type": "integer", "description": "trials"},
                        "k": {"type": "integer", "description": "successes"},
                        "p": {"type": "float", "description": "success probability"},
                    },
                    "required": ["n", "k", "p"],
                },
            }
        ],
    },
    {
        "id": "exec_simple_1",
        "question": [[{"role": "user", "content": "Convert 100 US dollars to euros."}]],
        "function": [
            {
                "name": "convert_currency",
                "description": "Convert money.",
                "parameters": {
                    "type": "dict",
                    "properties": {
                        "amount": {"type": "float", "description": "amount"},
                        "from_currency": {"type": "string", "description": "ISO code"},
                        "to_currency": {"type": "string", "description": "ISO code"},
                    },
                    "required": ["amount", "from_currency", "to_currency"],
                },
            }
        ],
    },
]
BFCL_EXEC_SIMPLE_ANSWERS = [
    {"id": "exec_simple_0", "ground_truth": ["calc_binomial_probability(n=20, k=5, p=0.5)"]},
    {"id": "exec_simple_1", "ground_truth": ["convert_currency(amount=100, from_currency='USD', to_currency='EUR')"]},
]

#: the graded tasks' plain-download files (their info.json `file` datasets, under the HF home)
ARENA_QUESTIONS = [
    {"uid": "u0", "category": "creative_writing", "subcategory": "poem", "prompt": "Write a haiku about rain."},
    {"uid": "h1", "category": "hard_prompt", "prompt": "Prove P != NP."},  # not creative writing: left out
]
ARENA_BASELINE = [
    {
        "uid": "u0",
        "model": "baseline",
        "messages": [
            {"role": "user", "content": "Write a haiku about rain."},
            {"role": "assistant", "content": {"answer": "Rain taps the window."}},
        ],
    },
]
HEALTH_EXAMPLES = [
    {
        "prompt_id": "p0",
        "prompt": [
            {"role": "user", "content": "I have had a cough for two days."},
            {"role": "assistant", "content": "Any fever?"},
            {"role": "user", "content": "No fever. What should I do?"},
        ],
        "rubrics": [{"criterion": "Suggests seeing a doctor if it worsens", "points": 6, "tags": ["axis:accuracy"]}],
        "example_tags": ["theme:global_health"],
    },
]
GRADED_FILES = {
    "ptb_files/arenahardwriting/question.jsonl": ARENA_QUESTIONS,
    "ptb_files/arenahardwriting/baseline-gemini-2.0-flash-001.jsonl": ARENA_BASELINE,
    "ptb_files/healthbench/hard_2025-05-08-21-00-10.jsonl": HEALTH_EXAMPLES,
}

#: (HF path, config folder, {split: rows}) of each HF dataset
HF_FIXTURES = {
    "gsm8k": ("openai/gsm8k", "default-data_dir=main", {"train": GSM8K_TRAIN, "test": GSM8K_TEST}),
    "humaneval": ("openai/openai_humaneval", "default", {"test": HUMANEVAL_TEST}),
    "aime2025": ("math-ai/aime25", "default", {"test": AIME25_TEST}),
    "aime2026": ("math-ai/aime26", "default", {"test": AIME26_TEST}),
    "gpqamain": ("Idavidrein/gpqa", "gpqa_main", {"train": GPQA_MAIN_TRAIN}),
}

_BUILD = r"""
import sys, datasets
for src, cache in zip(sys.argv[1::2], sys.argv[2::2]):
    datasets.load_dataset(src, cache_dir=cache)
"""


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_hf_datasets(datasets_cache: Path, fixtures: list[tuple[str, str, dict[str, list[dict]]]]) -> None:
    """Build `datasets`' Arrow cache of local copies (one process for all), then put each
    under its hub dataset's name and config folder."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = []
        for k, (hf_path, _config_dir, splits) in enumerate(fixtures):
            src = Path(tmp) / str(k) / hf_path.split("/")[-1]  # arrow files: <name>-<split>.arrow
            for split, rows in splits.items():
                _write_jsonl(src / f"{split}.jsonl", rows)
            argv += [str(src), str(Path(tmp) / str(k) / "cache")]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
        env.update(HF_HOME=str(Path(tmp) / "hf"), HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
        subprocess.run([sys.executable, "-c", _BUILD, *argv], check=True, env=env, capture_output=True)
        for k, (hf_path, config_dir, _splits) in enumerate(fixtures):
            (built,) = (Path(tmp) / str(k) / "cache" / hf_path.split("/")[-1]).iterdir()  # default-<hash>
            dest = datasets_cache / hf_path.replace("/", "___") / config_dir
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(built, dest, ignore=shutil.ignore_patterns("*.lock"))
            if "=" not in config_dir and config_dir != "default":
                # a named config (gpqa_main): `datasets` matches the folder to this field
                for info in dest.glob("*/*/dataset_info.json"):
                    meta = json.loads(info.read_text())
                    info.write_text(json.dumps({**meta, "config_name": config_dir}))


def write_bfcl(inspect_evals_cache: Path) -> None:
    root = inspect_evals_cache / "BFCL"
    # inspect_evals' bfcl checks this file before anything, else it clones the repository
    _write_jsonl(root / "BFCL_v4_simple_python.json", [])
    _write_jsonl(root / "unused_datasets/question/BFCL_v4_exec_simple.json", BFCL_EXEC_SIMPLE)
    _write_jsonl(root / "unused_datasets/possible_answer/BFCL_v4_exec_simple.json", BFCL_EXEC_SIMPLE_ANSWERS)


TASKS = ("gsm8k", "humaneval", "aime2025", "aime2026", "gpqamain", "bfcl")


def write_fixture_cache(hf_home: Path, tasks: tuple[str, ...] = TASKS) -> Path:
    """Every task's fixture data under hf_home (the layout the sandbox's HF variables name)."""
    hf_home = Path(hf_home)
    if "bfcl" in tasks:
        write_bfcl(hf_home / "inspect_evals")
    for rel, rows in GRADED_FILES.items():  # small plain files: always there
        _write_jsonl(hf_home / rel, rows)
    write_hf_datasets(hf_home / "datasets", [HF_FIXTURES[t] for t in tasks if t in HF_FIXTURES])
    return hf_home


if __name__ == "__main__":
    print(write_fixture_cache(Path(sys.argv[1]), tuple(sys.argv[2:]) or TASKS))
