"""Scorer overhead per attempt: one gsm8k attempt of the real evaluate.py (a fresh
process: start, imports of inspect_ai/inspect_evals/transformers, model checks, dataset
load, model load, generation, scoring, metrics.json) against a bare transformers floor on
the same model, prompts and token cap (a fresh process: import torch and transformers,
load the tokenizer and model, render the same chat template, tokenize without added
special tokens as the scorer does, generate as the scorer does: sampling with the model's
generation config unless its temperature is greedy).

    python bench/bench_scorer.py [--model DIR] [--hf-home DIR] [--repeats 3]
                                 [--limit 2] [--max-tokens 16] [--out FILE]

Without --model a tiny Llama 3-shaped model is built (tests/scorer/family_models.py; a
--model must ship a chat template); without --hf-home the tests' fixture
data is written (tests/scorer_fixtures.py). Runs are interleaved; medians are reported,
with the scorer's phases from the times its lines appear. CPU or GPU (whatever torch sees).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests"), str(REPO / "tests" / "scorer")]

FLOOR = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
t_import = time.perf_counter()
spec = json.load(open(sys.argv[1]))
device = "cuda:0" if torch.cuda.is_available() else "cpu"
tok = AutoTokenizer.from_pretrained(spec["model"])
model = AutoModelForCausalLM.from_pretrained(spec["model"], device_map=device)
t_load = time.perf_counter()
tok.padding_side = "left"
if tok.pad_token is None:
    tok.pad_token = tok.eos_token
texts = [tok.apply_chat_template(m, chat_template=spec["template"], tokenize=False, add_generation_prompt=True)
         for m in spec["messages"]]
enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
with torch.no_grad():
    out = model.generate(**enc, max_new_tokens=spec["max_tokens"], do_sample=spec["do_sample"],
                         pad_token_id=tok.pad_token_id)
answers = tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
t_gen = time.perf_counter()
print(json.dumps({"import": t_import - t0, "load": t_load - t_import, "generate": t_gen - t_load, "n": len(answers)}))
"""


def floor_spec(model: Path, hf_home: Path, limit: int, max_tokens: int, path: Path) -> None:
    """The prompts the scorer sends (gsm8k's 10-shot system message and its prompt
    template, over the same test questions), rendered by the same chat template."""
    from inspect_evals.gsm8k.gsm8k import MATH_PROMPT_TEMPLATE, record_to_sample, sample_to_fewshot
    from scorer_fixtures import GSM8K_TEST, GSM8K_TRAIN

    system = "\n\n".join(sample_to_fewshot(record_to_sample(r)) for r in GSM8K_TRAIN[:10])
    messages = [
        [
            {"role": "system", "content": system},
            {"role": "user", "content": MATH_PROMPT_TEMPLATE.format(prompt=r["question"])},
        ]
        for r in GSM8K_TEST[:limit]
    ]
    from ptb_scorer.chat_template import model_templates
    from ptb_scorer.seeds import is_greedy, model_temperature

    template = model_templates(model)["default"].text  # the base model's own, as the scorer renders
    do_sample = not is_greedy(model_temperature(model))  # the model's own decoding, as the scorer's
    spec = {"model": str(model), "messages": messages, "template": template, "max_tokens": max_tokens}
    path.write_text(json.dumps({**spec, "do_sample": do_sample}))


def run_scorer(model: Path, env: dict, limit: int, max_tokens: int, out: Path) -> dict:
    cmd = [
        sys.executable,
        "evaluate.py",
        "--model-path",
        str(model),
        "--json-output-file",
        str(out),
        "--limit",
        str(limit),
        "--max-tokens",
        str(max_tokens),
        "--backend",
        "hf",
        "--chat-template-from",
        str(model),
    ]
    t0 = time.perf_counter()
    marks: dict[str, float] = {}
    proc = subprocess.Popen(
        cmd, cwd=REPO / "tasks" / "gsm8k", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    for line in proc.stdout:
        now = time.perf_counter() - t0
        if line.startswith("gsm8k: max_tokens="):
            marks.setdefault("started", now)  # interpreter up, ptb_scorer imported
        elif line.startswith("PTB_SCORER_INFO"):
            marks.setdefault("checked", now)  # model checks, transformers import, dataset check
        elif "Running 1 tasks" in line:
            marks.setdefault("model_loaded", now)  # inspect imported, dataset and model loaded
    proc.wait()
    total = time.perf_counter() - t0
    if proc.returncode != 0 or not out.is_file():
        raise SystemExit(f"scorer failed (exit {proc.returncode})")
    return {"total": total, **marks}


def run_floor(spec: Path, env: dict) -> dict:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", FLOOR, str(spec)], env=env, capture_output=True, text=True)
    total = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"floor failed: {res.stderr[-2000:]}")
    return {"total": total, **json.loads(res.stdout.strip().splitlines()[-1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path)
    ap.add_argument("--hf-home", type=Path)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ptb-bench-scorer-"))
    if args.model is None:
        from family_models import build_family_model

        args.model = build_family_model("llama3", work / "tiny")
    if args.hf_home is None:
        from scorer_fixtures import write_fixture_cache

        args.hf_home = write_fixture_cache(work / "hf", ("gsm8k",))
    hf = args.hf_home
    env = {
        **os.environ,
        "HF_HOME": str(hf),
        "HF_HUB_CACHE": str(hf / "hub"),
        "HF_DATASETS_CACHE": str(hf / "datasets"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "INSPECT_LOG_DIR": str(work / "logs"),
    }
    spec = work / "floor.json"
    floor_spec(args.model, hf, args.limit, args.max_tokens, spec)
    scorer_runs, floor_runs = [], []
    for i in range(args.repeats):  # interleaved: drift hits both alike
        floor_runs.append(run_floor(spec, env))
        scorer_runs.append(run_scorer(args.model, env, args.limit, args.max_tokens, work / f"m{i}.json"))
    med = lambda runs, k: statistics.median(r[k] for r in runs if k in r)  # noqa: E731
    result = {
        "model": str(args.model),
        "limit": args.limit,
        "max_tokens": args.max_tokens,
        "repeats": args.repeats,
        "scorer_s": round(med(scorer_runs, "total"), 2),
        "scorer_phases_s": {k: round(med(scorer_runs, k), 2) for k in ("started", "checked", "model_loaded")},
        "floor_s": round(med(floor_runs, "total"), 2),
        "floor_phases_s": {k: round(med(floor_runs, k), 2) for k in ("import", "load", "generate")},
        "versions": json.loads((work / "m0.json").read_text())["versions"],
    }
    result["ratio"] = round(result["scorer_s"] / result["floor_s"], 2)
    print(
        f"scorer attempt {result['scorer_s']} s (phases {result['scorer_phases_s']}) vs bare transformers "
        f"{result['floor_s']} s (phases {result['floor_phases_s']}): ratio {result['ratio']}"
    )
    print(json.dumps(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
