"""Each task's evaluate.py as the harness calls it: a real subprocess, offline, fixture data.

Bad final models end in one named line (PTB_MODEL_INVALID, exit 3) with no traceback.
The vLLM backend runs through inspect's real vLLM provider against a stand-in `vllm`
executable (tests/scorer/fake_vllm.py): the argv inspect builds (chat template, tool
parser), the requests it sends and what the stand-in renders from them are checked; vLLM
itself is not. The chat template comes from the bundle the harness writes (here: one
written from the base model dir, as the harness does) or from --chat-template-from.
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
from family_models import AGENT_TEMPLATE, build_family_model, swap_template
from scorer_env import SCORER_ENV, fake_vllm, hf_home, records, tiny_model
from test_refusals import REFUSED

from ptb_scorer import chat_template as ct

pytestmark = pytest.mark.slow  # real scorer runs: minutes in all

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
    "unknown architecture": (lambda m: set_arch(m, "MysteryForCausalLM"), "base model's LlamaForCausalLM to Mystery"),
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


@pytest.fixture(scope="module")
def family(tmp_path_factory) -> dict[str, Path]:
    """Base model dirs of the families (tests/scorer/family_models.py), built on first use."""
    root = tmp_path_factory.mktemp("family")
    return {f: build_family_model(f, root / f) for f in ("qwen3", "llama3", "gemma3")}


def final_of(base: Path, tmp_path: Path) -> Path:
    """The agent's final model: the base model, with a template of its own saved into it."""
    final = copy_model(base, tmp_path / "final_model")
    swap_template(final)
    return final


def bundle(tmp_path: Path, base: Path, arch: str, *, tools: bool = False, **kwargs) -> Path:
    """What the harness writes into the scorer's task dir (ptb_chat_template.json)."""
    template = ct.choose(ct.Source(base, "org/base", "c" * 40), arch, tool_calling=tools, kwargs=kwargs)
    path = tmp_path / ct.BUNDLE_FILE
    path.write_text(template.to_json())
    return path


def test_vllm_backend_argv_and_requests(hf_home, family, tmp_path):
    """Two seeds of the final evaluation on one vLLM server: each request carries its own
    seed (ptb_scorer.seeds.request_seed of the run seed and the sample), no temperature
    (the server takes the model's generation config, as upstream's does)."""
    from ptb_scorer.seeds import request_seed
    from ptb_scorer.tasks import TASKS

    env, log = fake_vllm(tmp_path, "Reasoning.\nANSWER: 3,600")
    base = family["llama3"]
    model, out = final_of(base, tmp_path), tmp_path / "m.json"
    template = bundle(tmp_path, base, "LlamaForCausalLM")
    args = ("--backend", "vllm", "--limit", "2", "--max-tokens", "321", "--chat-template", str(template))
    args += ("--seeds", "72332,87681", "--first-seed-gates")
    res = evaluate("gsm8k", model, out, *args, "--base-architecture", "LlamaForCausalLM", env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (argv,) = records(log, "argv")  # one server for both seeds
    assert [ln.split()[:2] for ln in res.stdout.splitlines() if ln.startswith("PTB_MODEL_LOADED")] == [
        ["PTB_MODEL_LOADED", "n=1"]
    ]
    # golden: what inspect's vLLM provider asks `vllm serve` for, from our engine spec
    assert argv[:2] == ["serve", str(model.resolve())]
    served = Path(argv[argv.index("--chat-template") + 1]).read_text()
    assert served == ct.model_templates(base)["default"].text != AGENT_TEMPLATE  # the base model's, not final_model's
    assert argv[argv.index("--seed") + 1] == "0"
    assert "--trust-remote-code" not in argv and "--enable-auto-tool-choice" not in argv
    bodies = [r["body"] for r in records(log, "request") if r["path"].endswith("/chat/completions")]
    assert len(bodies) == 4 and all(b["max_tokens"] == 321 and "temperature" not in b for b in bodies)
    samples = [s.id for s in TASKS["gsm8k"].build().dataset[:2]]
    expected = sorted(request_seed(seed, sample) for seed in (72332, 87681) for sample in samples)
    assert sorted(b["seed"] for b in bodies) == expected and len(set(expected)) == 4
    assert all("chat_template_kwargs" not in b for b in bodies)  # the template's own defaults
    assert all(r["prompt"].startswith("<|begin_of_text|><|start_header_id|>system") for r in records(log, "render"))
    assert not out.exists()  # with seeds, each seed's metrics have a file of their own
    per_seed = {seed: json.loads(out.with_name(f"m.seed-{seed}.json").read_text()) for seed in (72332, 87681)}
    metrics = per_seed[72332]
    assert metrics["decoding"] == {"temperature": 1.0, "greedy": False}
    # the first fixture question's answer is 3,600, the second's -3
    assert (metrics["accuracy"], metrics["n_examples"], metrics["engine"]) == (0.5, 2, "vllm")
    assert per_seed[87681]["accuracy"] == 0.5
    record = metrics["chat_template"]
    assert record["source"] == {"repo": "org/base", "file": "tokenizer_config.json", "revision": "c" * 40}
    assert record["sha256"] == json.loads(template.read_text())["sha256"] and record["kwargs"] == {}
    # the scorer variant: our exact matcher, and none of its probes decided otherwise
    assert metrics["scorer"] == "exact_match"
    assert metrics["matcher"] == {"name": "last_number_exact/v1", "probes": 19, "probes_disagreeing": []}


def test_vllm_backend_bfcl_uses_the_familys_tool_parser(hf_home, family, tmp_path):
    env, log = fake_vllm(tmp_path, "no call")
    base = family["llama3"]
    template = bundle(tmp_path, base, "LlamaForCausalLM", tools=True)
    args = ("--backend", "vllm", "--limit", "1", "--chat-template", str(template))
    res = evaluate("bfcl", final_of(base, tmp_path), tmp_path / "m.json", *args, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (argv,) = records(log, "argv")
    assert "--enable-auto-tool-choice" in argv and argv[argv.index("--tool-call-parser") + 1] == "llama3_json"
    (body,) = [r["body"] for r in records(log, "request") if r["path"].endswith("/chat/completions")]
    assert [t["function"]["name"] for t in body["tools"]] == ["calc_binomial_probability"]
    assert body["max_tokens"] == 16000  # the task's default cap (the first step of its ladder)
    (rendered,) = records(log, "render")
    assert '"name": "calc_binomial_probability"' in rendered["prompt"]  # the tools reach the prompt


def test_gemma3_bfcl_is_scored_with_our_tool_template_and_the_pythonic_parser(hf_home, family, tmp_path):
    env, log = fake_vllm(tmp_path, "[calc_binomial_probability(n=20, k=5, p=0.5)]")
    base = family["gemma3"]
    template = bundle(tmp_path, base, "Gemma3ForCausalLM", tools=True)
    out = tmp_path / "m.json"
    args = ("--backend", "vllm", "--limit", "1", "--chat-template", str(template))
    res = evaluate("bfcl", final_of(base, tmp_path), out, *args, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (argv,) = records(log, "argv")
    assert argv[argv.index("--tool-call-parser") + 1] == "pythonic"
    own = (ct.OWN_TEMPLATES / "gemma3_tool_calling.jinja").read_text()
    assert Path(argv[argv.index("--chat-template") + 1]).read_text() == own
    record = json.loads(out.read_text())["chat_template"]
    assert record["source"] == {"repo": "ptb_scorer", "file": "templates/gemma3_tool_calling.jinja", "revision": None}
    assert record["replaces"] == "org/base tokenizer_config.json (no tools section)"


@pytest.mark.parametrize("backend", ["hf", "vllm"])
def test_template_variables_stay_at_their_defaults_unless_set(hf_home, family, tmp_path, backend):
    """Qwen3's template thinks unless told not to: by default no empty think block (upstream's
    vLLM passes nothing); with kwargs {enable_thinking: false} the template closes one."""
    base = family["qwen3"]
    prompts = {}
    for kwargs in ({}, {"enable_thinking": False}):
        run = tmp_path / ("off" if kwargs else "default")
        run.mkdir()
        env, log = fake_vllm(run, "ANSWER: 25") if backend == "vllm" else ({}, None)
        template = bundle(run, base, "Qwen3ForCausalLM", **kwargs)
        args = ("--backend", backend, "--limit", "1", "--max-tokens", "2", "--chat-template", str(template))
        res = evaluate("aime2025", final_of(base, run), run / "m.json", *args, "--prompt-log", str(run / "p"), env=env)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        rows = records(log, "render") if log else [json.loads(x) for x in (run / "p").read_text().splitlines()]
        prompts[bool(kwargs)] = rows[0]["prompt"]
        assert json.loads((run / "m.json").read_text())["chat_template"]["kwargs"] == kwargs
        if log:
            bodies = [r["body"] for r in records(log, "request") if r["path"].endswith("/chat/completions")]
            assert all(b.get("chat_template_kwargs") == (kwargs or None) for b in bodies)
    assert prompts[False].endswith("<|im_start|>assistant\n")
    assert prompts[True].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_vllm_server_that_dies_fails_the_attempt_cleanly(hf_home, family, tmp_path):
    env, log = fake_vllm(tmp_path, "x")
    (tmp_path / "bin" / "vllm").write_text(f"#!{sys.executable}\nimport sys; sys.exit(7)\n")
    base = family["llama3"]
    args = ("--backend", "vllm", "--limit", "1", "--chat-template-from", str(base))
    res = evaluate("gsm8k", base, tmp_path / "m.json", *args, env=env)
    assert res.returncode == 1 and not (tmp_path / "m.json").exists()
    assert res.stdout.strip().splitlines()[-1].startswith("PTB_SCORER_ERROR: ")


def test_without_a_chat_template_the_scorer_says_how_to_name_one(hf_home, family, tmp_path):
    """No bundle next to evaluate.py (the harness writes one) and none named: one line."""
    res = evaluate("aime2025", family["llama3"], tmp_path / "m.json", "--chat-template", str(tmp_path / "none.json"))
    assert res.returncode == 1 and "Traceback" not in res.stdout + res.stderr
    (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith("PTB_SCORER_ERROR: ")]
    assert "chat template:" in line and "--chat-template-from" in line
    assert not (tmp_path / "m.json").exists()


def test_the_agents_saved_template_is_never_used_on_the_transformers_backend(hf_home, family, tmp_path):
    """final_model carries a template that would fail if used: the base model's is applied."""
    from transformers import AutoTokenizer

    base = family["gemma3"]
    model = final_of(base, tmp_path)
    (model / "chat_template.jinja").write_text("{{ raise_exception('the agent template was used') }}")
    out = tmp_path / "m.json"
    args = ("--backend", "hf", "--limit", "1", "--max-tokens", "2", "--prompt-log", str(tmp_path / "p"))
    res = evaluate("aime2025", model, out, *args, "--chat-template", str(bundle(tmp_path, base, "Gemma3ForCausalLM")))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "the agent template was used" not in res.stdout + res.stderr
    (row,) = [json.loads(x) for x in (tmp_path / "p").read_text().splitlines()]
    bos = AutoTokenizer.from_pretrained(base).bos_token_id
    assert row["prompt"].startswith("<bos><start_of_turn>user\n")
    assert row["input_ids"][0] == bos and row["input_ids"].count(bos) == 1  # the template's; none added


@pytest.mark.parametrize("kernels", [None, "math,cudnn"])
def test_the_hf_backend_chooses_its_attention_kernels_and_generates_every_seed_on_one_thread(
    hf_home, family, tmp_path, kernels
):
    """The transformers backend's attention kernels are chosen before the model loads and
    recorded in each seed's metrics (the campaign's evaluate.sdpa_kernels, handed over as
    PTB_SDPA_KERNELS; by default not cuDNN, whose per-thread, per-shape plans compile anew
    at every decoded token). Three seeds in one attempt (each an inspect eval of its own)
    are generated on one thread: nothing torch keeps per thread is built per seed."""
    from ptb_scorer.protocol import SDPA_KERNELS_ENV, seed_output

    base = family["llama3"]  # names no temperature: it samples, so every request is seeded
    out = tmp_path / "m.json"
    args = ("--backend", "hf", "--limit", "1", "--max-tokens", "2", "--chat-template-from", str(base))
    env = {} if kernels is None else {SDPA_KERNELS_ENV: kernels}
    res = evaluate("gsm8k", base, out, *args, "--seeds", "11,12,13", env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    expected = ["flash", "efficient", "math"] if kernels is None else ["math", "cudnn"]
    for seed in (11, 12, 13):
        metrics = json.loads(seed_output(out, seed).read_text())
        assert metrics["attention"] == {"sdpa_kernels": expected}
        assert metrics["generating_threads"] == 1, seed


def test_an_unknown_attention_kernel_is_one_named_line(hf_home, family, tmp_path):
    from ptb_scorer.protocol import SDPA_KERNELS_ENV

    base = family["llama3"]
    args = ("--backend", "hf", "--limit", "1", "--chat-template-from", str(base))
    res = evaluate("gsm8k", base, tmp_path / "m.json", *args, env={SDPA_KERNELS_ENV: "flash,fast"})
    assert res.returncode == 1 and "Traceback" not in res.stdout + res.stderr
    (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith("PTB_SCORER_ERROR: ")]
    assert SDPA_KERNELS_ENV in line and "'flash,fast'" in line
