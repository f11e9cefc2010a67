"""Mutation probe of the decision modules: plant one small, plausible bug at a time and see
whether the unit tests notice.

    python bench/mutants.py              # every mutant (about 10 minutes on 2 cores)
    python bench/mutants.py --only reap  # the mutants whose name contains "reap"
    python bench/mutants.py --list

Each mutant names a file, a regular expression that must match exactly once there, its
replacement, and the unit tests that should catch it. Sites are found by pattern, not by
line number, so the probe keeps working while the modules are edited; a mutant whose
pattern no longer matches is reported `stale` (update its pattern) and left out of the
score. The probe works on a copy of the working tree (tracked and untracked files that
git does not ignore), never on the tree itself, and runs the tests of each area once
unmutated first: a red baseline stops it.

Not part of the pytest suite: a run takes minutes. The score and the survivors are
printed and written to bench/results/mutants.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

OUTCOME = "src/ptb_harness/results/outcome.py"
PROTOCOL = "src/ptb_scorer/protocol.py"
REAP = "src/ptb_harness/gpu/reap.py"
RECORDS = "src/ptb_harness/core/records.py"
EVALUATE = "src/ptb_harness/stages/evaluate.py"
LEADERBOARD = "src/ptb_harness/results/leaderboard.py"
REDACT = "src/ptb_harness/traces/redact.py"
CELLS = "src/ptb_harness/campaign/cells.py"
LAYOUT = "src/ptb_harness/core/layout.py"

#: The unit tests of each area (the ones a developer runs after touching it).
TESTS = {
    "outcome": ["tests/unit/test_outcome.py"],
    "gpu": ["tests/unit/test_gpu.py"],
    "metrics": ["tests/unit/test_evaluate.py"],
    "leaderboard": ["tests/unit/test_collect.py"],
    "redaction": ["tests/unit/test_traces.py"],
    "names": ["tests/unit/test_campaign.py"],
}


@dataclass(frozen=True)
class Mutant:
    name: str
    area: str  # a key of TESTS
    path: str
    find: str  # a regular expression (MULTILINE) that matches exactly once in path
    replace: str  # its replacement (re.sub syntax)
    why: str  # the bug it plants, in words


def _drop_fault(alternative: str, name: str) -> Mutant:
    """One alternative of MODEL_FAULTS deleted (its whole source line)."""
    return Mutant(
        f"outcome: model fault '{name}' forgotten",
        "outcome",
        PROTOCOL,
        r'^\s*r"\|?' + re.escape(alternative) + r'.*"\n',
        "",
        f"a scorer failing with '{name}' is blamed on the machine",
    )


MUTANTS: list[Mutant] = [
    # -- outcome ------------------------------------------------------------------------------
    *(
        _drop_fault(alt, name)
        for alt, name in [
            ("PTB_MODEL_INVALID:", "PTB_MODEL_INVALID"),
            ("does not appear to have", "does not appear to have a file"),
            ("Unrecognized (", "Unrecognized ..."),
            ("(?:SafetensorError", "SafetensorError"),
            ("Error while deserializing header", "Error while deserializing header"),
            ("is not a valid model identifier", "not a valid model identifier"),
            ("No such file or directory:", "missing config.json"),
            ("size mismatch for", "size mismatch"),
        ]
    ),
    Mutant(
        "outcome: one model-fault attempt is enough",
        "outcome",
        OUTCOME,
        r"(\n\s*)if fault is None:\n(\s*)return None",
        r"\1if fault is None:\n\2continue",
        "a scorer that failed once for the machine and once for the model blames the agent",
    ),
    Mutant(
        "outcome: corrupt metrics.json is the agent's",
        "outcome",
        OUTCOME,
        r'return "infra_failed", f"\{METRICS\} is invalid',
        r'return "agent_failed", f"{METRICS} is invalid',
        "a metrics.json broken on disk is blamed on the agent",
    ),
    Mutant(
        "outcome: an unverifiable stage counts as dead",
        "outcome",
        OUTCOME,
        r"if live is False:",
        r"if not live:",
        "a stage running on another host is called dead",
    ),
    Mutant(
        "outcome: preflight failure is the agent's",
        "outcome",
        OUTCOME,
        r'return "infra_failed", f"CUDA preflight failed',
        r'return "agent_failed", f"CUDA preflight failed',
        "a node without a working GPU is blamed on the agent",
    ),
    Mutant(
        "outcome: a solve without final model files is pending",
        "outcome",
        OUTCOME,
        r'if not rec\.solve\.get\("final_model_files"\):',
        r'if rec.solve.get("final_model_files") is None:',
        "an agent that left zero files waits forever for a score",
    ),
    # -- GPU victim choice ----------------------------------------------------------------------
    Mutant(
        "reap: an unknown owner counts as ours",
        "gpu",
        REAP,
        r'if mode == "own" and p\.uid != my_uid:',
        r'if mode == "own" and p.uid is not None and p.uid != my_uid:',
        "own mode kills processes whose owner /proc does not show",
    ),
    Mutant(
        "reap: the GPU set is ignored",
        "gpu",
        REAP,
        r"if p\.gpu_uuid\.lower\(\) not in in_scope or ",
        r"if ",
        "processes on other GPUs of the node are killed",
    ),
    Mutant(
        "reap: protected pids are not protected",
        "gpu",
        REAP,
        r" or p\.pid in protected_pids",
        r"",
        "the harness may kill itself or its parents",
    ),
    Mutant(
        "reap: choose_victims accepts any mode",
        "gpu",
        REAP,
        r"(\n    \"\"\"The processes to kill(?s:.*?)\"\"\"\n)    check_mode\(mode\)\n",
        r"\1",
        "a misspelt mode kills like `all` or silently does nothing",
    ),
    Mutant(
        "reap: own mode with an unknown GPU set takes every GPU",
        "gpu",
        REAP,
        r"\n    return \[\]\n\n\ndef _kill",
        r"\n    return list_gpus(nvml)\n\n\ndef _kill",
        "the user's jobs on other GPUs of the node are killed",
    ),
    Mutant(
        "reap: all mode with an unknown GPU set does nothing quietly",
        "gpu",
        REAP,
        r'if policy\.mode == "all":\n(\s*)raise HarnessError',
        r"if False:\n\1raise HarnessError",
        "a whole-node reap that cannot know its GPUs passes silently",
    ),
    Mutant(
        "reap: survivors are not waited for",
        "gpu",
        REAP,
        r"report\.survivors = _wait_gone\(.*\)",
        r"report.survivors = []",
        "the next attempt starts while the killed processes still hold the GPU",
    ),
    Mutant(
        "reap: the harness's own ancestry is not protected",
        "gpu",
        REAP,
        r"frozenset\(_ancestors\(os\.getpid\(\)\)\)",
        r"frozenset()",
        "a harness process holding a CUDA context kills itself",
    ),
    # -- metrics validation -----------------------------------------------------------------------
    Mutant(
        "metrics: written before it is validated",
        "metrics",
        EVALUATE,
        r"^(\s*)(metrics, why = check_metrics\(data\))",
        r"\1if data is not None: atomic_write_bytes(metrics_json, data)\n\1\2",
        "a scorer's 1.5 or NaN stays as metrics.json",
    ),
    Mutant(
        "metrics: no lower bound",
        "metrics",
        RECORDS,
        r"not 0\.0 <= acc <= 1\.0",
        r"not acc <= 1.0",
        "a negative accuracy is scored",
    ),
    Mutant(
        "metrics: true is a number",
        "metrics",
        RECORDS,
        r"isinstance\(acc, bool\) or ",
        r"",
        "accuracy true scores 1.0",
    ),
    Mutant(
        "metrics: a JSON list is fine",
        "metrics",
        RECORDS,
        r"if not isinstance\(obj, dict\):\n(\s*)return None, \"not a JSON object\"\n",
        r"",
        "a list crashes the stage instead of naming the problem",
    ),
    Mutant(
        "evaluate: the ladder's token cap is dropped",
        "metrics",
        EVALUATE,
        r"evaluate_argv\(([^()]*(?:\([^()]*\))?[^()]*), cap\)",
        r"evaluate_argv(\1, None)",
        "every retry runs with the same (failing) generation length",
    ),
    Mutant(
        "evaluate: the task's token flag is ignored",
        "metrics",
        EVALUATE,
        r"argv \+= \[task\.token_flag, str\(max_tokens\)\]",
        r'argv += ["--max-tokens", str(max_tokens)]',
        "a task that takes --max-new-tokens gets an unknown flag",
    ),
    # -- leaderboard statistics ------------------------------------------------------------------
    Mutant(
        "leaderboard: gap instead of inverse gap",
        "leaderboard",
        LEADERBOARD,
        r"raw\[t\] = 1 / \(instruct - base\)",
        r"raw[t] = instruct - base",
        "easy tasks weigh most",
    ),
    Mutant(
        "leaderboard: a zero gap is weighed",
        "leaderboard",
        LEADERBOARD,
        r"if instruct <= base:",
        r"if instruct < base:",
        "instruct == base divides by zero",
    ),
    Mutant(
        "leaderboard: instruct score is the best model's",
        "leaderboard",
        LEADERBOARD,
        r"instruct = sum\(scores\.values\(\)\) / len\(scores\)",
        r"instruct = max(scores.values())",
        "weights from the best instruct model, not the mean",
    ),
    Mutant(
        "leaderboard: population std",
        "leaderboard",
        LEADERBOARD,
        r'"std": run_means\.std\(ddof=1\)',
        r'"std": run_means.std(ddof=0)',
        "the spread over repeats is understated",
    ),
    Mutant(
        "leaderboard: a task is complete with one model",
        "leaderboard",
        LEADERBOARD,
        r'"complete": len\(per_model\) == len\(models\)',
        r'"complete": len(per_model) > 0',
        "a weighted average over a partial task",
    ),
    Mutant(
        "leaderboard: mean over cells, not over models",
        "leaderboard",
        LEADERBOARD,
        r'"mean": per_model\.mean\(\)',
        r'"mean": scored["accuracy"].mean()',
        "a model with more scored repeats counts more",
    ),
    Mutant(
        "leaderboard: infra_failed cells fall back to the base model",
        "leaderboard",
        LEADERBOARD,
        r'return outcome == "agent_failed" or ',
        r'return outcome in ("agent_failed", "infra_failed") or ',
        "a broken node is papered over with the base model's score",
    ),
    Mutant(
        "leaderboard: the base agent's own cells fall back",
        "leaderboard",
        LEADERBOARD,
        r"eligible = ~is_base & ",
        r"eligible = ",
        "the base row counts its failed cells as itself",
    ),
    Mutant(
        "leaderboard: ranked ascending",
        "leaderboard",
        LEADERBOARD,
        r"-agents\[e\] if not math\.isnan",
        r"agents[e] if not math.isnan",
        "the worst agent is ranked first",
    ),
    Mutant(
        "leaderboard: ties get different ranks",
        "leaderboard",
        LEADERBOARD,
        r"rank\[entry\] = rank\[order\[i - 1\]\] if tied else i \+ 1",
        r"rank[entry] = i + 1",
        "two entries with the same average are ranked apart by name",
    ),
    # -- redaction ------------------------------------------------------------------------------
    Mutant(
        "redaction: secrets from 12 characters",
        "redaction",
        REDACT,
        r"^MIN_SECRET_LEN = 8$",
        r"MIN_SECRET_LEN = 12",
        "an 11-character password leaks",
    ),
    Mutant(
        "redaction: secrets from 7 characters",
        "redaction",
        REDACT,
        r"^MIN_SECRET_LEN = 8$",
        r"MIN_SECRET_LEN = 7",
        "7-character values (common words) are blanked",
    ),
    Mutant(
        "redaction: shortest secret first",
        "redaction",
        REDACT,
        r"key=lambda p: -len\(p\[0\]\)",
        r"key=lambda p: len(p[0])",
        "a secret containing another leaks its tail",
    ),
    Mutant(
        "redaction: placeholders redacted",
        "redaction",
        REDACT,
        r" and not _PLACEHOLDER\.match\(v\)",
        r"",
        "`your-api-key-here` in ordinary text is blanked",
    ),
    Mutant(
        "redaction: *_PASSWORD variables are not secrets",
        "redaction",
        REDACT,
        r"_PASSWORD\|",
        r"",
        "a DB_PASSWORD set in the environment leaks",
    ),
    Mutant(
        "redaction: hf tokens need 40 characters",
        "redaction",
        REDACT,
        r"hf_\[A-Za-z0-9\]\{30,\}",
        r"hf_[A-Za-z0-9]{40,}",
        "a 34-character Hugging Face token leaks",
    ),
    # -- name checks ----------------------------------------------------------------------------
    Mutant(
        "names: '..' allowed",
        "names",
        CELLS,
        r' or "\.\." in value',
        r"",
        "a name climbs out of the results tree",
    ),
    Mutant(
        "names: a leading dot or dash allowed",
        "names",
        LAYOUT,
        r'NAME_PATTERN = r"\[A-Za-z0-9_\]\[',
        r'NAME_PATTERN = r"[A-Za-z0-9_.-][',
        "hidden cell dirs, or names read as options",
    ),
    Mutant(
        "names: a trailing newline allowed",
        "names",
        CELLS,
        r"_NAME_RE\.fullmatch\(value\)",
        r"_NAME_RE.match(value)",
        "`m1\\n` passes ($ matches before a final newline) and names a directory with a newline",
    ),
]


def copy_tree(dst: Path) -> None:
    """The working tree as git sees it (tracked and not ignored), without .git."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        rel = Path(os.fsdecode(raw))
        src = REPO / rel
        if not src.is_file() or rel.parts[0] == ".venv":
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst / rel)


def run_tests(tree: Path, area: str, timeout_s: float) -> tuple[int | None, float, str]:
    """(pytest's exit status or None on timeout, seconds, its last line)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not slow", *TESTS[area]]
    t0 = time.monotonic()
    try:
        res = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - t0, "timeout"
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    return res.returncode, time.monotonic() - t0, lines[-1] if lines else ""


def apply(tree: Path, m: Mutant) -> str | None:
    """The original text of the mutated file, or None when the pattern does not match once."""
    path = tree / m.path
    if not path.is_file():
        return None
    text = path.read_text()
    mutated, n = re.subn(m.find, m.replace, text, flags=re.MULTILINE)
    if n != 1:
        return None
    path.write_text(mutated)
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="run the mutants whose name contains this")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per test run")
    args = ap.parse_args()
    mutants = [m for m in MUTANTS if not args.only or args.only in m.name]
    if args.list:
        for m in mutants:
            print(f"{m.name}  [{m.area}: {m.path}]  {m.why}")
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="ptb-mutants-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        for area in sorted({m.area for m in mutants}):
            rc, secs, last = run_tests(tree, area, args.timeout)
            print(f"baseline {area}: {last} ({secs:.0f} s)", flush=True)
            if rc != 0:
                print(f"the unmutated tests of {area} fail: fix them first")
                return 2
        for m in mutants:
            original = apply(tree, m)
            if original is None:
                verdict, secs, last = "stale", 0.0, "pattern does not match exactly once"
            else:
                try:
                    rc, secs, last = run_tests(tree, m.area, args.timeout)
                finally:
                    (tree / m.path).write_text(original)
                verdict = "survived" if rc == 0 else "killed"
            results.append(
                {"mutant": m.name, "verdict": verdict, "seconds": round(secs, 1), "tests": last, "why": m.why}
            )
            print(f"{verdict:8} {m.name} ({secs:.0f} s): {last}", flush=True)
    scored = [r for r in results if r["verdict"] != "stale"]
    killed = [r for r in scored if r["verdict"] == "killed"]
    print(f"\nscore: {len(killed)}/{len(scored)} killed", end="")
    stale = len(results) - len(scored)
    print(f" ({stale} stale: update their patterns)" if stale else "")
    for r in scored:
        if r["verdict"] == "survived":
            print(f"  survived: {r['mutant']}: {r['why']}")
    out = REPO / "bench" / "results" / "mutants.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"killed": len(killed), "scored": len(scored), "mutants": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
