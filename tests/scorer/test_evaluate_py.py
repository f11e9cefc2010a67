"""Each task's evaluate.py as the harness calls it: a real subprocess, offline, fixture data.

Bad final models end in one named line (PTB_MODEL_INVALID, exit 3) with no traceback.
The vLLM backend runs through inspect's real vLLM provider against a stand-in `vllm`
executable (tests/scorer/fake_vllm.py): the argv inspect builds (chat template, tool
parser) and the requests it sends are checked; vLLM itself is not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from scorer_env import SCORER_ENV, fake_vllm, hf_home, tiny_model
from test_refusals import REFUSED

TASKS = REPO / "tasks"


def evaluate(task: str, model: Path, out: Path, *args: str, env: dict | None = None, timeout: float = 300):
    cmd = [sys.executable, "evaluate.py", "--model-path", str(model), "--json-output-file", str(out), *args]
    # the task dir's own ptb_scorer; the fixture cache, offline
    full_env = {**os.environ, "PYTHONPATH": "", **SCORER_ENV, **(env or {})}
    return subprocess.run(cmd, cwd=TASKS / task, capture_output=True, text=True, timeout=timeout, env=full_env)


def copy_model(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def set_arch(model: Path, arch: str) -> None:
    cfg = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**cfg, "architectures": [arch]}))


BAD = {
    "no config.json": (lambda m: (m / "config.json").unlink(), "has no config.json"),
    "unknown architecture": (lambda m: set_arch(m, "MysteryForCausalLM"), "MysteryForCausalLM has no chat template"),
    "weights missing": (lambda m: (m / "model.safetensors").unlink(), "has no weights"),
    "architecture changed": (lambda m: set_arch(m, "Qwen3ForCausalLM"), "changed from the base model's Llama"),
    "no tokenizer": (lambda m: [(m / f).unlink() for f in ("tokenizer.json", "tokenizer_config.json")], "no tokenizer"),
}


# a model whose loading would run the agent's code (ptb_scorer.refusals): refused before any engine
BAD.update({f"refused: {name}": case for name, case in REFUSED.items()})


@pytest.mark.parametrize("case", BAD)
def test_bad_final_model_is_one_named_line(case, tiny_model, tmp_path):
    model = copy_model(tiny_model, tmp_path / "final_model")
    BAD[case][0](model)
    res = evaluate("gsm8k", model, tmp_path / "m.json", "--base-architecture", "LlamaForCausalLM")
    assert res.returncode == 3, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("PTB_MODEL_INVALID: ")]
    assert len(lines) == 1 and BAD[case][1] in lines[0], res.stdout
    assert not (tmp_path / "m.json").exists()


def test_missing_dataset_is_one_line_not_minutes_of_retries(tiny_model, tmp_path):
    empty = tmp_path / "hf"
    env = {"HF_HOME": str(empty), "HF_DATASETS_CACHE": str(empty / "datasets"), "HF_HUB_CACHE": str(empty / "hub")}
    res = evaluate("aime2025", tiny_model, tmp_path / "m.json", env=env, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stdout + res.stderr
    assert "PTB_SCORER_ERROR: dataset missing: dataset math-ai/aime25 (default) not in" in res.stdout


def records(log: Path, kind: str) -> list:
    return [r["data"] for r in map(json.loads, log.read_text().splitlines()) if r["kind"] == kind]


def test_vllm_backend_argv_and_requests(hf_home, tiny_model, tmp_path):
    env, log = fake_vllm(tmp_path, "Reasoning.\nANSWER: 3,600")
    out = tmp_path / "m.json"
    res = evaluate("gsm8k", tiny_model, out, "--backend", "vllm", "--limit", "2", "--max-tokens", "321", env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (argv,) = records(log, "argv")
    template = str((REPO / "templates" / "llama3.jinja").resolve())
    # golden: what inspect's vLLM provider asks `vllm serve` for, from our engine spec
    assert argv[:2] == ["serve", str(tiny_model.resolve())]
    assert argv[argv.index("--chat-template") + 1] == template
    assert argv[argv.index("--seed") + 1] == "0"
    assert "--trust-remote-code" not in argv and "--enable-auto-tool-choice" not in argv
    bodies = [r["body"] for r in records(log, "request") if r["path"].endswith("/chat/completions")]
    assert len(bodies) == 2 and all(b["max_tokens"] == 321 and b["temperature"] == 0 for b in bodies)
    metrics = json.loads(out.read_text())
    # the first fixture question's answer is 3,600, the second's -3
    assert (metrics["accuracy"], metrics["n_examples"], metrics["engine"]) == (0.5, 2, "vllm")
    assert metrics["template"]["name"] == "llama3" and len(metrics["template"]["sha256"]) == 64
    # the scorer variant: our exact matcher, and none of its probes decided otherwise
    assert metrics["scorer"] == "exact_match"
    assert metrics["matcher"] == {"name": "last_number_exact/v1", "probes": 19, "probes_disagreeing": []}


def test_vllm_backend_bfcl_uses_native_tool_calls(hf_home, tiny_model, tmp_path):
    env, log = fake_vllm(tmp_path, "no call")
    res = evaluate("bfcl", tiny_model, tmp_path / "m.json", "--backend", "vllm", "--limit", "1", env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (argv,) = records(log, "argv")
    assert "--enable-auto-tool-choice" in argv and argv[argv.index("--tool-call-parser") + 1] == "hermes"
    (body,) = [r["body"] for r in records(log, "request") if r["path"].endswith("/chat/completions")]
    assert [t["function"]["name"] for t in body["tools"]] == ["calc_binomial_probability"]
    assert body["max_tokens"] == 16000  # the task's default cap (the first step of its ladder)


def test_vllm_server_that_dies_fails_the_attempt_cleanly(hf_home, tiny_model, tmp_path):
    env, log = fake_vllm(tmp_path, "x")
    (tmp_path / "bin" / "vllm").write_text(f"#!{sys.executable}\nimport sys; sys.exit(7)\n")
    res = evaluate("gsm8k", tiny_model, tmp_path / "m.json", "--backend", "vllm", "--limit", "1", env=env)
    assert res.returncode == 1 and not (tmp_path / "m.json").exists()
    assert res.stdout.strip().splitlines()[-1].startswith("PTB_SCORER_ERROR: ")


def test_the_agents_saved_template_is_ignored_and_none_is_needed(hf_home, tiny_model, tmp_path):
    """The tiny model's tokenizer has no chat template (template-less: scored with ours);
    here the agent also saved one that would fail if used: it is never applied."""
    model = copy_model(tiny_model, tmp_path / "final_model")
    (model / "chat_template.jinja").write_text("{{ raise_exception('the agent template was used') }}")
    out = tmp_path / "m.json"
    res = evaluate("aime2025", model, out, "--backend", "hf", "--limit", "1", "--max-tokens", "2")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "the agent template was used" not in res.stdout + res.stderr
    assert json.loads(out.read_text())["template"]["name"] == "llama3"
