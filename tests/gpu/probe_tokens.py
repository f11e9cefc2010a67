"""Where the scorer's per-seed time goes (issue 28): one 5-seed gsm8k attempt of the real
evaluate.py at 32, 2 and 128 max tokens, then the bare floor at 128, on one model, one
question. The scorer's time per seed at 2 tokens is its fixed cost; the slope from 2 to
128 tokens is its generation's cost a token, against the floor's.

    python tests/gpu/probe_tokens.py [--device cuda|cpu] [--model DIR | --model-size 1b]

On the device machine run it with the carried site as tests/gpu/device_seeds.sh sets it
up; it prints one JSON line per run (docs/evidence/scorer_seeds_gpu/probe_tokens_1b.txt).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "bench"), str(REPO / "src"), str(REPO / "tests"), str(REPO / "tests" / "scorer")]

import bench_seeds  # noqa: E402
from family_models import build_family_model  # noqa: E402
from scorer_fixtures import write_fixture_cache  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--model", type=Path)
    ap.add_argument("--model-size", choices=("tiny", "1b"), default="1b")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ptb-probe-tokens-"))
    env = bench_seeds.environment(write_fixture_cache(work / "hf", ("gsm8k",)), work, args.device)
    model = args.model or build_family_model("llama3", work / args.model_size, args.model_size)
    seeds = bench_seeds.FINAL_EVAL_SEEDS
    for max_tokens in (32, 2, 128):
        run = bench_seeds.run_scorer(model, env, 1, max_tokens, seeds, work / f"one-{max_tokens}.json")
        print(max_tokens, json.dumps(run), flush=True)
    rows = bench_seeds.gsm8k_test_rows(None)[:1]
    bench_seeds.floor_spec(model, rows, 128, seeds, work / "floor.json", bench_seeds.DEFAULT_SDPA_KERNELS)
    floor = bench_seeds.run_floor(work / "floor.json", env)
    print("floor128", json.dumps({k: floor[k] for k in ("total", "import", "load", "per_seed")}), flush=True)


if __name__ == "__main__":
    main()
