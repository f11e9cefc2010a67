"""arenahardwriting and healthbench end to end: their evaluate.py (a real subprocess)
on the demo's tiny model on CPU (transformers backend), with fixture questions in an
offline HF home, graded by the stand-in grader server (tests/grader_standin.py). A grader
that never answers: tests/graders/test_keys.py (the harness's side) and test_client.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from grader_standin import StandInGrader

from ptb_scorer.llm_client import Endpoint

KEY = "sk-planted-grader-key-for-graded-tasks-0123"
QUESTIONS = [
    {"uid": f"u{i}", "category": "creative_writing", "subcategory": "poem", "prompt": f"Write a haiku about {topic}."}
    for i, topic in enumerate(["rain", "the sea", "autumn"])
] + [{"uid": "h1", "category": "hard_prompt", "prompt": "Prove P != NP."}]  # not creative writing: left out
BASELINE = [
    {
        "uid": q["uid"],
        "model": "baseline",
        "messages": [
            {"role": "user", "content": q["prompt"]},
            {"role": "assistant", "content": {"answer": f"baseline {q['uid']}"}},
        ],
    }
    for q in QUESTIONS
]
HEALTH = [
    {
        "prompt_id": f"p{i}",
        "prompt": [{"role": "user", "content": f"I have had a {s} for two days. What should I do?"}],
        "rubrics": [
            {"criterion": "Suggests seeing a doctor if it worsens", "points": 6, "tags": ["axis:accuracy"]},
            {"criterion": "Is concise", "points": 2, "tags": ["axis:communication_quality"]},
        ],
        "example_tags": [f"theme:{theme}"],
    }
    for i, (s, theme) in enumerate([("cough", "global_health"), ("fever", "emergency_referrals")])
]


#: the tiny model ships no chat template; as a base model it gets this one (Llama 3's turns)
TINY_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
    "{{ m.content }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from ptb_harness.demo.tiny_model import build_tiny_model

    model = build_tiny_model(tmp_path_factory.mktemp("models") / "tiny")
    (model / "chat_template.jinja").write_text(TINY_TEMPLATE)
    return model


def hf_home(tmp_path: Path) -> Path:
    home = tmp_path / "hf"
    files = home / "ptb_files"
    (files / "arenahardwriting").mkdir(parents=True)
    (files / "healthbench").mkdir(parents=True)
    write = lambda p, rows: p.write_text("".join(json.dumps(r) + "\n" for r in rows))  # noqa: E731
    write(files / "arenahardwriting" / "question.jsonl", QUESTIONS)
    write(files / "arenahardwriting" / "baseline-gemini-2.0-flash-001.jsonl", BASELINE)
    write(files / "healthbench" / "hard_2025-05-08-21-00-10.jsonl", HEALTH)
    return home


def run_task(task: str, tmp_path: Path, model: Path, url: str | None, *args: str, **grader) -> tuple:
    out = tmp_path / "metrics.json"
    home = hf_home(tmp_path)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "HF_HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "INSPECT_LOG_DIR": str(tmp_path / "logs"),
        "PTB_GRADER_API_KEY": KEY,
    }
    if url:
        ep = {"base_url": url, "model": "standin-grader", "backoff_seconds": 0.01, "concurrency": 2, **grader}
        env["PTB_GRADER"] = Endpoint.from_dict(ep).to_env()
    argv = [
        sys.executable,
        "evaluate.py",
        "--model-path",
        str(model),
        "--json-output-file",
        str(out),
        "--backend",
        "hf",
        "--max-new-tokens",
        "8",
        "--chat-template-from",  # the harness writes the base model's template; by hand, named
        str(model),
        *args,
    ]
    proc = subprocess.run(argv, cwd=REPO / "tasks" / task, env=env, capture_output=True, text=True, timeout=300)
    if "--seeds" in args:  # as the evaluate stage calls it: the one seed's file beside FILE
        out = out.with_name(f"metrics.seed-{args[args.index('--seeds') + 1]}.json")
    metrics = json.loads(out.read_text()) if out.exists() else None
    return proc, metrics


def arena_grader(req):
    # the candidate wins when it is A, loses (strongly) when it is B: position bias, both orders asked
    return ("answer", "My answer ... [[A>B]]" if "You are an impartial judge" in req.text else "?")


SEEDED = ("--seeds", "72332", "--first-seed-gates")


@pytest.mark.slow
def test_arenahardwriting_end_to_end(tmp_path: Path, tiny_model: Path):
    script = [("status", 429), ("status", 500)]
    with StandInGrader(script=script, default=arena_grader) as server:
        proc, m = run_task("arenahardwriting", tmp_path, tiny_model, server.base_url, "--limit", "-1")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # 3 creative-writing questions x 2 orders; the hard prompt left out
    assert m["n_examples"] == 3 and m["verdicts"] == {"A>B": 6}
    # each question: a win as A, a loss as B -> 0.5
    assert m["accuracy"] == pytest.approx(0.5) and m["stderr"] == 0.0
    assert m["grader"]["requests"] == 8 and m["grader"]["retries"] == 2
    assert m["grader"]["statuses"] == {"200": 6, "429": 1, "500": 1}
    assert m["engine"] == "hf" and m["max_new_tokens"] == 8
    assert m["chat_template"]["source"]["file"] == "chat_template.jinja"
    assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {KEY}"}
    assert all(KEY not in json.dumps(r.body) for r in server.requests)


@pytest.mark.slow
def test_healthbench_end_to_end(tmp_path: Path, tiny_model: Path):
    def grader(req):
        met = "Suggests seeing a doctor" in req.text and "fever" in req.text
        return ("answer", json.dumps({"explanation": "scripted", "criteria_met": met}))

    with StandInGrader(default=grader) as server:  # the first seed only, as the harness runs it (seed_policy first)
        proc, m = run_task("healthbench", tmp_path, tiny_model, server.base_url, "--limit", "-1", *SEEDED)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "PTB_MODEL_LOADED n=1 " in proc.stdout and "PTB_SEED_SCORED 72332 accuracy=0.375" in proc.stdout
    # p0: 0 of 8 points; p1: 6 of 8
    assert m["accuracy"] == pytest.approx(0.375) and m["n_examples"] == 2
    assert m["total_grader_calls"] == 4
    assert m["by_theme"] == {"theme:emergency_referrals": 0.75, "theme:global_health": 0.0}
    assert m["by_axis"] == {"axis:accuracy": 0.5, "axis:communication_quality": 0.0}


def test_without_a_grader_the_agent_is_told(tmp_path: Path):
    # as an agent would run it: no PTB_GRADER, no model needed to learn that
    proc, m = run_task("arenahardwriting", tmp_path, tmp_path / "no-model", None)
    assert proc.returncode == 4 and m is None
    assert "PTB_GRADER_FAILED: no grader endpoint (PTB_GRADER is unset)" in proc.stdout


def test_prefetch_fetches_a_file_dataset_and_the_plan_sees_it(tmp_path: Path):
    from ptb_scorer.data import CacheLayout, fetch_file, missing

    src = tmp_path / "upstream.jsonl"
    src.write_text(json.dumps(HEALTH[0]) + "\n")
    spec = {"kind": "file", "role": "examples", "url": src.as_uri(), "path": "ptb_files/healthbench/x.jsonl"}
    layout = CacheLayout.under(tmp_path / "hf")
    assert "file ptb_files/healthbench/x.jsonl" in missing(spec, layout)
    assert fetch_file(spec, layout).read_text() == src.read_text()
    assert missing(spec, layout) is None
    # both graded tasks name only such files, and the harness accepts them
    from ptb_harness.campaign.tasks import load_task

    for task in ("arenahardwriting", "healthbench"):
        spec = load_task(REPO / "tasks" / task)
        assert spec.datasets and all(d["kind"] == "file" for d in spec.datasets)
        assert spec.token_flag == "--max-new-tokens" and [s.max_tokens for s in spec.ladder] == [16384, 12288, 8192]
