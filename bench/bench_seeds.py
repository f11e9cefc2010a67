"""The final evaluation's seeds: five seeds in one attempt (one scorer process, one model
load) against five single-seed attempts (a process and a load each), and against a bare
transformers floor that loads the model once and generates the same requests the same
way for every seed, in one run (interleaved, medians).

    python bench/bench_seeds.py [--model DIR | --model-size tiny|1b] [--hf-home DIR]
                                [--device cpu|cuda] [--repeats 3] [--limit 2] [--questions N]
                                [--max-tokens 16] [--sdpa-kernels flash,efficient,math]
                                [--no-single-seed-attempts] [--out FILE]

The scorer is the real gsm8k evaluate.py (transformers backend, ``--seeds``, as the
evaluate stage calls it; its PTB_MODEL_LOADED lines counted). The floor, a fresh process:
import torch and transformers, load the tokenizer and model, then for each seed render
each sample's prompt with the same chat template, tokenize it without added special
tokens, seed torch with the request's seed (ptb_scorer.seeds.request_seed) and generate
it alone with sampling, as the scorer's transformers backend does; its answers are
compared with the scorer's (inspect's eval logs), so both did the same work.

Without --model a random Llama 3-shaped model is built (tests/scorer/family_models.py): tiny
by default, where the fixed costs (imports, inspect's eval, process starts) dominate, or of a
base model's size (``--model-size 1b``, on a GPU), where the load and generation cost what a
real base model's do;
without --hf-home the tests' fixture data is written (tests/scorer_fixtures.py), its three
gsm8k test questions, or ``--questions N`` of them (made up in the fixture's shape: a
realistic attempt has 50 or more).
``--device cpu`` hides the GPUs from both (CUDA_VISIBLE_DEVICES=""); ``cuda``: the first.
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

from ptb_scorer.engine import DEFAULT_SDPA_KERNELS  # noqa: E402
from ptb_scorer.protocol import SDPA_KERNELS_ENV  # noqa: E402
from ptb_scorer.seeds import FINAL_EVAL_SEEDS  # noqa: E402

FLOOR = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
t_import = time.perf_counter()
spec = json.load(open(sys.argv[1]))
device = "cuda:0" if torch.cuda.is_available() else "cpu"
# the attention kernels the scorer is given, so both generate on the same ones
cuda = torch.backends.cuda
kernels = spec["sdpa_kernels"]
cuda.enable_flash_sdp("flash" in kernels); cuda.enable_mem_efficient_sdp("efficient" in kernels)
cuda.enable_math_sdp("math" in kernels); cuda.enable_cudnn_sdp("cudnn" in kernels)
tok = AutoTokenizer.from_pretrained(spec["model"])
model = AutoModelForCausalLM.from_pretrained(spec["model"], device_map=device)
t_load = time.perf_counter()
texts = [tok.apply_chat_template(m, chat_template=spec["template"], tokenize=False, add_generation_prompt=True)
         for m in spec["messages"]]
answers, per_seed = {}, []
for seed, request_seeds in spec["request_seeds"].items():
    t = time.perf_counter()
    for sample_id, text, request_seed in zip(spec["sample_ids"], texts, request_seeds):
        enc = tok(text, return_tensors="pt", add_special_tokens=False).to(device)
        torch.manual_seed(request_seed)
        with torch.inference_mode():
            out = model.generate(**enc, max_new_tokens=spec["max_tokens"], do_sample=True)
        answers[f"{seed}/{sample_id}"] = tok.decode(
            out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True, clean_up_tokenization_spaces=False)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    per_seed.append(time.perf_counter() - t)
print(json.dumps({"import": t_import - t0, "load": t_load - t_import, "per_seed": per_seed,
                  "generate": sum(per_seed), "answers": answers, "device": device}))
"""


def gsm8k_test_rows(questions: int | None) -> list[dict[str, str]]:
    """The fixture's gsm8k test rows, or ``questions`` rows: the fixture's, then made-up ones
    in their shape (a question, a worked answer ending in ``#### <number>``)."""
    from scorer_fixtures import GSM8K_TEST

    if questions is None:
        return list(GSM8K_TEST)
    made_up = [
        {
            "question": f"A farm has {3 * i + 4} cows and sells {i} of them, then buys {2 * i + 1}. How many cows now?",
            "answer": f"{3 * i + 4} - {i} + {2 * i + 1} = {4 * i + 5}\n#### {4 * i + 5}",
        }
        for i in range(1, max(0, questions - len(GSM8K_TEST)) + 1)
    ]
    return (list(GSM8K_TEST) + made_up)[:questions]


def write_gsm8k_cache(hf_home: Path, rows: list[dict[str, str]]) -> Path:
    """An offline HF home whose openai/gsm8k has the fixture's train rows and these test rows."""
    from scorer_fixtures import GSM8K_TRAIN, HF_FIXTURES, write_hf_datasets

    hf_path, config_dir, _ = HF_FIXTURES["gsm8k"]
    write_hf_datasets(hf_home / "datasets", [(hf_path, config_dir, {"train": GSM8K_TRAIN, "test": rows})])
    return hf_home


def floor_spec(
    model: Path,
    rows: list[dict[str, str]],
    max_tokens: int,
    seeds: tuple[int, ...],
    path: Path,
    kernels: tuple[str, ...],
) -> None:
    """The requests the scorer sends (gsm8k's 10-shot system message and prompt over these
    test rows, as ptb_scorer builds the task), rendered by the same chat template, and each
    request's seed for every run seed."""
    from inspect_evals.gsm8k.gsm8k import MATH_PROMPT_TEMPLATE, record_to_sample, sample_to_fewshot
    from scorer_fixtures import GSM8K_TRAIN

    from ptb_scorer.chat_template import model_templates
    from ptb_scorer.seeds import request_seed

    system = "\n\n".join(sample_to_fewshot(record_to_sample(r)) for r in GSM8K_TRAIN[:10])
    messages = [
        [
            {"role": "system", "content": system},
            {"role": "user", "content": MATH_PROMPT_TEMPLATE.format(prompt=r["question"])},
        ]
        for r in rows
    ]
    sample_ids = [record_to_sample(r).id for r in rows]
    spec = {
        "model": str(model),
        "messages": messages,
        "sample_ids": sample_ids,
        "template": model_templates(model)["default"].text,  # the base model's own, as the scorer renders
        "max_tokens": max_tokens,
        "sdpa_kernels": list(kernels),
        "request_seeds": {str(s): [request_seed(s, i) for i in sample_ids] for s in seeds},
    }
    path.write_text(json.dumps(spec))


def run_scorer(model: Path, env: dict, limit: int, max_tokens: int, seeds: tuple[int, ...], out: Path) -> dict:
    """One evaluate.py attempt with these seeds: its wall, its loads, each seed's time (from
    the model load's line to its PTB_SEED_SCORED line, or the previous seed's)."""
    cmd = [sys.executable, "evaluate.py", "--model-path", str(model), "--json-output-file", str(out)]
    cmd += ["--limit", str(limit), "--max-tokens", str(max_tokens), "--backend", "hf"]
    cmd += ["--chat-template-from", str(model), "--seeds", ",".join(map(str, seeds)), "--first-seed-gates"]
    t0 = time.perf_counter()
    loads, marks = 0, []
    proc = subprocess.Popen(
        cmd, cwd=REPO / "tasks" / "gsm8k", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    for line in proc.stdout:
        if line.startswith("PTB_MODEL_LOADED"):
            loads += 1
            marks.append(time.perf_counter() - t0)
        elif line.startswith("PTB_SEED_SCORED"):
            marks.append(time.perf_counter() - t0)
    proc.wait()
    total = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"scorer failed (exit {proc.returncode})")
    per_seed = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    return {"total": total, "loads": loads, "until_loaded": marks[0], "per_seed": per_seed}


def agreement(mine: dict[str, str], floor: dict[str, str]) -> float:
    """The share of the answers' characters that are equal, position by position (1.0:
    identical): with a model bigger than the tiny one, later seeds' answers differ from the
    floor's in a few characters, most likely the same seeded sampling flipping near-ties on
    float sums that differ between the two processes."""
    same = total = 0
    for key in mine.keys() | floor.keys():
        a, b = mine.get(key, ""), floor.get(key, "")
        same += sum(x == y for x, y in zip(a, b, strict=False))
        total += max(len(a), len(b))
    return round(same / total, 4) if total else 1.0


def scorer_answers(out: Path, seeds: tuple[int, ...], logs: Path) -> dict[str, str]:
    """The scorer's answers, from inspect's eval log of each seed."""
    answers = {}
    for seed in seeds:
        name = json.loads(out.with_name(f"{out.stem}.seed-{seed}{out.suffix}").read_text())["log"]
        (log,) = logs.rglob(name)
        for s in json.loads(log.read_text())["samples"]:
            answers[f"{seed}/{s['id']}"] = s["output"]["choices"][0]["message"]["content"]
    return answers


def run_floor(spec: Path, env: dict) -> dict:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", FLOOR, str(spec)], env=env, capture_output=True, text=True)
    total = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"floor failed: {res.stderr[-2000:]}")
    return {"total": total, **json.loads(res.stdout.strip().splitlines()[-1])}


def environment(hf: Path, work: Path, device: str) -> dict:
    env = {
        **os.environ,
        "HF_HOME": str(hf),
        "HF_HUB_CACHE": str(hf / "hub"),
        "HF_DATASETS_CACHE": str(hf / "datasets"),
        "INSPECT_EVALS_CACHE_DIR": str(hf / "inspect_evals"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "TMPDIR": str(work / "tmp"),  # where the scorer's inspect logs go (read back for the answers)
    }
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    (work / "tmp").mkdir(exist_ok=True)
    return env


def measure(args: argparse.Namespace, work: Path, env: dict, spec: Path) -> dict:
    seeds = FINAL_EVAL_SEEDS
    one, five, floor = [], [], []
    for i in range(args.repeats):  # interleaved: drift hits all three alike
        floor.append(run_floor(spec, env))
        out = work / f"one-{i}.json"
        one.append(run_scorer(args.model, env, args.limit, args.max_tokens, seeds, out))
        if i == 0:
            mine = scorer_answers(out, seeds, work / "tmp")
        if args.no_single_seed_attempts:
            continue
        runs = [
            run_scorer(args.model, env, args.limit, args.max_tokens, (s,), work / f"five-{i}-{s}.json") for s in seeds
        ]
        five.append({"total": sum(r["total"] for r in runs), "loads": sum(r["loads"] for r in runs)})
    if not five:
        five = [{"total": float("nan"), "loads": None}]
    med = lambda runs, key: statistics.median(r[key] for r in runs)  # noqa: E731
    for r in one:  # the scorer after its load: every seed's eval, each seed's requests generated
        r["after_load"] = sum(r["per_seed"])
    n = len(seeds)
    return {
        "seeds": list(seeds),
        "one_attempt_s": round(med(one, "total"), 2),
        "one_attempt_loads": one[0]["loads"],
        "five_attempts_s": round(med(five, "total"), 2),
        "five_attempts_loads": five[0]["loads"],
        "ratio_five_attempts_over_one": round(med(five, "total") / med(one, "total"), 2),
        "scorer_until_loaded_s": round(med(one, "until_loaded"), 2),
        "scorer_per_seed_s": round(med(one, "after_load") / n, 3),
        "floor_load_s": round(med(floor, "load"), 3),
        "floor_per_seed_s": round(med(floor, "generate") / n, 3),
        "floor_total_s": round(med(floor, "total"), 2),
        "ratio_per_seed": round(med(one, "after_load") / med(floor, "generate"), 2),
        "ratio_one_attempt_over_floor_load_and_generate": round(
            med(one, "total") / (med(floor, "load") + med(floor, "generate")), 2
        ),
        # both whole processes: their imports, load and every seed's generation
        "ratio_one_attempt_over_floor_process": round(med(one, "total") / med(floor, "total"), 2),
        "same_answers_as_floor": mine == floor[0]["answers"],
        "scorer_answers": mine,
        "answer_chars_agreeing_with_floor": agreement(mine, floor[0]["answers"]),
        "device": floor[0]["device"],
        "runs": {
            "one_attempt": [{k: r[k] for k in ("total", "loads", "until_loaded", "per_seed")} for r in one],
            "five_attempts": five,
            "floor": [{k: r[k] for k in ("total", "import", "load", "per_seed")} for r in floor],
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path)
    ap.add_argument("--model-size", choices=("tiny", "1b"), default="tiny")
    ap.add_argument("--hf-home", type=Path)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=int, default=2)
    ap.add_argument("--questions", type=int, help="gsm8k test questions in the data (default: the fixture's 3)")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument(
        "--sdpa-kernels",
        default=",".join(DEFAULT_SDPA_KERNELS),
        help="the attention kernels of the scorer (PTB_SDPA_KERNELS) and of the floor alike",
    )
    ap.add_argument("--no-single-seed-attempts", action="store_true", help="skip the five one-seed attempts")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ptb-bench-seeds-"))
    built = args.model is None
    if built:
        from family_models import build_family_model

        args.model = build_family_model("llama3", work / args.model_size, args.model_size)
    rows = gsm8k_test_rows(args.questions)
    if args.limit > len(rows):
        raise SystemExit(f"--limit {args.limit}: the data has {len(rows)} gsm8k test questions (--questions)")
    if args.hf_home is None:
        args.hf_home = write_gsm8k_cache(work / "hf", rows)
    env = environment(args.hf_home, work, args.device)
    kernels = tuple(args.sdpa_kernels.split(","))
    env[SDPA_KERNELS_ENV] = ",".join(kernels)
    spec = work / "floor.json"
    floor_spec(args.model, rows[: args.limit], args.max_tokens, FINAL_EVAL_SEEDS, spec, kernels)
    result = {
        "model": str(args.model),
        "model_size": args.model_size if built else None,
        "limit": args.limit,
        "max_tokens": args.max_tokens,
        "repeats": args.repeats,
        "sdpa_kernels": list(kernels),
    }
    result.update(measure(args, work, env, spec))
    print(
        f"5 seeds in one attempt {result['one_attempt_s']} s ({result['one_attempt_loads']} load) vs 5 single-seed "
        f"attempts {result['five_attempts_s']} s ({result['five_attempts_loads']} loads): "
        f"{result['ratio_five_attempts_over_one']}x; per seed after the load {result['scorer_per_seed_s']} s vs "
        f"the floor's {result['floor_per_seed_s']} s ({result['ratio_per_seed']}x); the attempt vs the floor's "
        f"load + 5 seeds: {result['ratio_one_attempt_over_floor_load_and_generate']}x; "
        f"same answers: {result['same_answers_as_floor']} "
        f"({result['answer_chars_agreeing_with_floor']:.1%} of their characters)"
    )
    print(json.dumps(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
