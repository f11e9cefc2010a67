"""The scorer's cost a decoded token against a bare ``generate`` of the same loaded model in
the same process, under each set of attention kernels (issue 35).

    python tests/gpu/probe_attention.py [--device cuda|cpu] [--size 1b|tiny] [--tokens 64] [--rounds 3]
                                        [--kernel-sets default,with_cudnn]

One model (a random Llama 3-shaped one, tests/scorer/family_models.py) loaded once by the
scorer's own path (``ptb_scorer.cli._prepare`` -> ``engine.load_model``). Per round and per
kernel set (``engine.use_sdpa_kernels``: the default, and the default plus cudnn):

- ``bare_cold``: ``model.generate`` on the main thread, on the scorer's gsm8k prompt made
  longer by a length never used before, so no per-shape cache is warm (the honest floor);
- ``scorer``: one seed of the real gsm8k eval of one question (inspect eval -> ptb_hf ->
  the process's one generating thread);
- ``bare_cold_on_thread``: ``bare_cold`` on that generating thread, the main thread
  waiting (what the thread costs);
- ``bare_cold_as_inspect``: ``bare_cold`` with the keyword arguments the scorer's generate
  was passed (inspect's stopping criteria; since ``hf_backend.sequences_only``, no
  ``return_dict_in_generate``);
- ``bare_cold_with_dict``: ``bare_cold`` with ``return_dict_in_generate=True``, as inspect
  asks for it (what ``sequences_only`` saves).

Every generate is forced to exactly ``--tokens`` new tokens. A decoded token's cost is the
median interval between consecutive forward calls after the prefill (a forward pre-hook).
Prints one JSON line per run and a summary: the scorer's decode cost over the floor's, per
kernel set, as the ratio of the medians and as the median of each round's own ratio (the
variants of one round run back to back, so a drift of the card's speed between rounds
cancels out of the paired figure). Run it with the carried site, as tests/gpu/device_seeds.sh sets it up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "bench"), str(REPO / "src"), str(REPO / "tests"), str(REPO / "tests" / "scorer")]

KERNEL_SETS = {"default": ("flash", "efficient", "math"), "with_cudnn": ("flash", "efficient", "math", "cudnn")}


def main() -> None:  # noqa: C901  (one probe, its variants sharing one loaded model)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--size", choices=("tiny", "1b"), default="1b")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kernel-sets", default=",".join(KERNEL_SETS), help="which of: " + ", ".join(KERNEL_SETS))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    kernel_sets = {k: KERNEL_SETS[k] for k in args.kernel_sets.split(",")}

    import bench_seeds
    from scorer_fixtures import write_fixture_cache

    work = Path(tempfile.mkdtemp(prefix="ptb-probe-attention-"))
    os.environ.update(bench_seeds.environment(write_fixture_cache(work / "hf", ("gsm8k",)), work, args.device))
    from family_models import build_family_model

    model_dir = build_family_model("llama3", work / args.size, args.size)

    import torch

    from ptb_scorer import cli, engine, hf_backend
    from ptb_scorer.task_info import TaskInfo

    here = REPO / "tasks" / "gsm8k"
    info = TaskInfo.read(here / "info.json")
    argv = ["--model-path", str(model_dir), "--json-output-file", str(work / "m.json"), "--limit", "1"]
    argv += ["--max-tokens", str(args.tokens), "--backend", "hf", "--chat-template-from", str(model_dir)]
    scoring = cli._prepare("gsm8k", info, cli.task_parser("gsm8k", info, here).parse_args(argv))
    loaded = engine.load_model(scoring.spec)
    hf, tok = loaded.api.model, loaded.api.tokenizer
    cuda = hf.device.type == "cuda"
    print(f"model {args.size} {hf.dtype} on {hf.device}, attention {hf.config._attn_implementation}", flush=True)

    steps: list[tuple[float, int]] = []  # (time, input length) of every forward
    hf.register_forward_pre_hook(
        lambda _m, _a, kw: steps.append((time.perf_counter(), kw["input_ids"].shape[1])), with_kwargs=True
    )
    generate = hf.generate
    inspect_kwargs: dict = {}

    def forced(*a, **kw):
        if threading.current_thread().name.startswith("ptb-generate") and not inspect_kwargs.get("seen"):
            inspect_kwargs.update({k: v for k, v in kw.items() if k not in ("input_ids", "attention_mask")}, seen=True)
        kw["min_new_tokens"] = kw.get("max_new_tokens")  # the same length everywhere
        out = generate(*a, **kw)
        if cuda:
            torch.cuda.synchronize()
        return out

    hf.generate = forced
    prompt: dict[str, str] = {}
    chat = type(loaded.api).hf_chat

    def capture(self, messages, tools):
        text = chat(self, messages, tools)
        prompt.setdefault("text", text)
        return text

    type(loaded.api).hf_chat = capture
    unseen = [0]

    def bare_cold(**extra) -> None:
        unseen[0] += 1
        enc = tok([prompt["text"] + " ." * (37 * unseen[0])], return_tensors="pt", add_special_tokens=False)
        torch.manual_seed(1234)
        with torch.inference_mode():
            hf.generate(**enc.to(hf.device), **{"max_new_tokens": args.tokens, "do_sample": True, **extra})

    def scorer() -> None:
        scoring.score(loaded, 72332)

    def bare_cold_on_thread() -> None:
        hf_backend._GENERATING.submit(bare_cold).result()

    def bare_cold_as_inspect() -> None:
        bare_cold(**{k: v for k, v in inspect_kwargs.items() if k not in ("seen", "min_new_tokens")})

    def bare_cold_with_dict() -> None:
        bare_cold(return_dict_in_generate=True)

    variants = {
        "bare_cold": bare_cold,
        "scorer": scorer,
        "bare_cold_on_thread": bare_cold_on_thread,
        "bare_cold_as_inspect": bare_cold_as_inspect,
        "bare_cold_with_dict": bare_cold_with_dict,
    }
    scorer()  # warm-up: CUDA's start, inspect's imports; and the prompt captured
    print("inspect's generate kwargs:", {k: repr(v)[:120] for k, v in inspect_kwargs.items()}, flush=True)
    results = []
    for rnd in range(args.rounds):
        for kernels, allowed in kernel_sets.items():
            engine.use_sdpa_kernels(allowed)
            for name, run in variants.items():
                steps.clear()
                t0 = time.perf_counter()
                run()
                wall = time.perf_counter() - t0
                decode = [b[0] - a[0] for a, b in zip(steps, steps[1:], strict=False) if b[1] == 1]
                r = {
                    "round": rnd,
                    "kernels": kernels,
                    "variant": name,
                    "wall_s": round(wall, 3),
                    "forwards": len(steps),
                    "decode_ms_median": round(1e3 * statistics.median(decode), 3),
                    "first_decodes_ms": [round(1e3 * x, 1) for x in decode[:3]],
                }
                results.append(r)
                print(json.dumps(r), flush=True)
    engine.use_sdpa_kernels(KERNEL_SETS["default"])
    summary = summarize(results, list(variants), list(kernel_sets))
    print("summary", json.dumps(summary), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"size": args.size, "tokens": args.tokens, "summary": summary, "runs": results}))


def summarize(results: list[dict], variants: list[str], kernel_sets: list[str]) -> dict:
    """Per kernel set: each variant's median decode cost, its ratio over the floor's median,
    and the median of its ratios over the floor of the same round."""
    summary = {}
    for kernels in kernel_sets:
        med = {
            v: statistics.median(r["decode_ms_median"] for r in results if (r["kernels"], r["variant"]) == (kernels, v))
            for v in variants
        }
        summary[kernels] = {f"{v}_ms_per_token": round(m, 3) for v, m in med.items()}
        for v in variants[1:]:
            summary[kernels][f"ratio_{v}_over_bare_cold"] = round(med[v] / med["bare_cold"], 3)
            by_round = {(r["round"], r["variant"]): r["decode_ms_median"] for r in results if r["kernels"] == kernels}
            paired = [by_round[rnd, v] / by_round[rnd, "bare_cold"] for rnd, w in by_round if w == v]
            summary[kernels][f"paired_{v}_over_bare_cold"] = round(statistics.median(paired), 3)
            summary[kernels][f"paired_{v}_over_bare_cold_rounds"] = [round(x, 3) for x in paired]
    return summary


if __name__ == "__main__":
    main()
