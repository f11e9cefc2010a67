"""The judge's evidence on a 400,000-file job dir: what the evidence recorder costs beside
the agent, and what the judge stage costs after it, each against a floor measured in the
same run (seconds and peak RSS).

    python bench/bench_evidence.py [--quick] [--files N] [--dir /dev/shm]

1. harness  the job dir holds N files of the harness's before the agent starts (a big task
            copy or payload): the recorder's start (its baseline walk, a watch per dir)
            and its final scan over them unchanged, vs a plain walk with lstat of the same
            tree (the floor of one walk).
2. agent    the agent writes N distinct small text files while the recorder runs (each
            closed file read at once: inotify), then the recorder's final scan: the writes'
            time with and without the recorder, the recorder's CPU and peak RSS, and its
            final scan, vs a plain loop that opens, reads and hashes the same files (the
            floor of reading them at all).
3. judge    the judge stage of that cell (run_judge in a child: evidence.json, the kept
            agent files, the transcript, six requests to a stand-in judge), and the solve's
            keeping of the agent's files for its prompt (save_agent_files over the N files).

The text files are 120-250 bytes, 100 per directory, as a venv's or a dataset's shards
are small and many; the test set has 1,000 samples of 40 words.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

from ptb_harness.stages.evidence import JudgedSamples, RecorderProcess  # noqa: E402
from ptb_harness.stages.evidence_recorder import RecorderConfig  # noqa: E402

PER_DIR = 100
WORDS = [f"w{i}" for i in range(5000)]
SAMPLES = [" ".join(WORDS[(i * 37 + j * 11) % 5000] for j in range(40)) for i in range(1000)]


def make_files(root: Path, n: int) -> float:
    """n distinct small text files, PER_DIR to a dir; seconds taken."""
    t = time.perf_counter()
    for d in range(0, n, PER_DIR):
        here = root / f"d{d // PER_DIR:05d}"
        here.mkdir(parents=True)
        for i in range(d, min(d + PER_DIR, n)):
            fd = os.open(here / f"f{i}.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, (f"step {i} loss {1 / (i + 1):.6f} lr 0.0002 " * (1 + i % 4)).encode())
            os.close(fd)
    return time.perf_counter() - t


def walk_floor(root: Path) -> float:
    t = time.perf_counter()
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.stat(follow_symlinks=False) and e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
    return time.perf_counter() - t


def read_floor(root: Path) -> float:
    t = time.perf_counter()
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            with open(os.path.join(dirpath, f), "rb") as fh:
                hashlib.sha256(fh.read()).hexdigest()
    return time.perf_counter() - t


def recorder(job: Path, cell: Path) -> RecorderProcess:
    spec = {"path": "test.jsonl", "fields": ["q"]}
    config = RecorderConfig(job_root=str(job), roots=["home", "tmp"], out_dir=str(cell), test_set_spec=spec,
                            scan_seconds=3600, max_files=10**7)  # fmt: skip
    return RecorderProcess(config, JudgedSamples(SAMPLES), cell, os.environ)


def stop(rec: RecorderProcess, cell: Path) -> tuple[float, dict]:
    t = time.perf_counter()
    problem = rec.stop(cell / "evidence.json")
    took = time.perf_counter() - t
    assert problem is None, problem
    return took, json.loads((cell / "evidence.json").read_text())


def bench_harness(n: int, base: Path) -> dict:
    job, cell = base / "h-job", base / "h-cell"
    (job / "tmp").mkdir(parents=True)
    cell.mkdir()
    made = make_files(job / "home" / "task", n)
    floor = walk_floor(job / "home")
    t = time.perf_counter()
    rec = recorder(job, cell)
    ready = time.perf_counter() - t
    final, ev = stop(rec, cell)
    print(f"harness  {n:>7} files (made in {made:.1f} s)")
    print(f"  plain walk with lstat (floor)          {floor:7.2f} s")
    print(f"  recorder start (baseline walk, watches) {ready:7.2f} s   {ready / floor:5.1f}x the floor")
    print(f"  recorder final scan, nothing changed    {final:7.2f} s   {final / floor:5.1f}x the floor")
    print(f"  recorder CPU {ev['cpu_seconds']:.1f} s, peak RSS {ev['max_rss_kb'] / 1024:.0f} MiB, "
          f"files read {ev['counts']['versions']}")  # fmt: skip
    return {"walk_floor": floor, "start": ready, "final": final, "rss_mib": ev["max_rss_kb"] / 1024}


def bench_agent(n: int, base: Path) -> tuple[Path, Path, dict]:
    alone = make_files(base / "alone" / "home", n)
    read = read_floor(base / "alone" / "home")
    shutil.rmtree(base / "alone")
    job, cell = base / "a-job", base / "a-cell"
    (job / "home").mkdir(parents=True)
    (job / "tmp").mkdir()
    cell.mkdir()
    rec = recorder(job, cell)
    beside = make_files(job / "home" / "work", n)
    final, ev = stop(rec, cell)
    print(f"agent    {n:>7} files written while the recorder runs")
    print(
        f"  the agent's writes alone / beside the recorder  {alone:7.2f} s / {beside:7.2f} s  ({beside / alone:.2f}x)"
    )
    print(f"  open, read and hash each file (floor)   {read:7.2f} s")
    cpu = ev["cpu_seconds"]
    print(f"  recorder CPU in all                      {cpu:7.2f} s   {cpu / read:5.1f}x the floor")
    print(f"  recorder CPU a file                      {cpu / n * 1e6:7.0f} us")
    print(f"  recorder's stop after the writes (its backlog, then the final scan) {final:7.2f} s")
    print(f"  recorder peak RSS {ev['max_rss_kb'] / 1024:.0f} MiB; versions read {ev['counts']['versions']}, "
          f"complete {ev['complete']}")  # fmt: skip
    numbers = {"alone": alone, "beside": beside, "read_floor": read, "cpu": cpu, "stop": final}
    return job, cell, numbers | {"rss_mib": ev["max_rss_kb"] / 1024}


def bench_judge(job: Path, cell: Path) -> dict:
    from ptb_harness.stages.agent_files import save_agent_files
    from ptb_harness.traces.redact import Redactor

    t = time.perf_counter()
    save_agent_files(job / "home", job / "none", cell, Redactor({}), 50 * 10**6, 10**7)
    kept = time.perf_counter() - t
    code = f"""
import json, os, resource, sys, time
sys.path.insert(0, {str(REPO / "tests")!r}); sys.path.insert(0, {str(REPO / "tests" / "graders")!r})
from conftest import campaign_config, make_workdir, write_config, write_task
from grader_standin import StandInGrader
from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.config import load_config_files
from ptb_harness.judging.judges import FIELDS
from ptb_harness.stages.judge import run_judge
from pathlib import Path
clean = json.dumps({{f: {{"flagged": False, "justification": "no"}} for f in FIELDS}})
root = make_workdir(Path({str(cell.parent / "campaign")!r}))
write_task(root, "graded", "pass\\n", {{"judge": {{"test_set": {{"path": "test.jsonl", "fields": ["q"]}}}}}})
os.environ["PTB_GRADER_API_KEY"] = "sk-bench"
with StandInGrader(default=lambda r: ("answer", clean)) as server:
    ep = {{"base_url": server.base_url, "model": "m", "backoff_seconds": 0.01}}
    write_config(root, campaign_config(tasks=["graded"], judge={{"enabled": True, "endpoint": ep}}))
    campaign = load_config_files(root)
    cdir = Path({str(cell)!r})
    (cdir / "final_model").mkdir(exist_ok=True)
    (cdir / "t.txt").write_text("[t] ASSISTANT: training\\n")
    t = time.perf_counter()
    rec = run_judge(campaign, Cell("exit0", "graded", "m1", "0.0005", 0, 1), transcript=cdir / "t.txt",
                    final_model=cdir / "final_model", judgement_json=cdir / "judgement.json")
    took = time.perf_counter() - t
from ptb_harness.stages.evidence_recorder import peak_rss_kb
print(json.dumps({{"seconds": took, "rss_kb": peak_rss_kb(), "verdict": rec["verdict"]}}))
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600)
    if res.returncode:
        raise SystemExit(res.stderr[-3000:])
    out = json.loads(res.stdout.strip().splitlines()[-1])
    print("judge    the cell of the agent's files")
    print(f"  the solve keeps the agent's files for the prompt (save_agent_files) {kept:7.2f} s")
    print(f"  run_judge (evidence.json, kept files, 6 stand-in requests)         {out['seconds']:7.2f} s, "
          f"peak RSS {out['rss_kb'] / 1024:.0f} MiB, verdict {out['verdict']}")  # fmt: skip
    return {"kept": kept, "judge": out["seconds"], "judge_rss_mib": out["rss_kb"] / 1024}


def measure(n: int, where: str) -> dict:
    """Every part, on n files under where: the numbers (run_all's rows)."""
    base = Path(tempfile.mkdtemp(prefix="ptb-bench-evidence-", dir=where))
    try:
        harness = bench_harness(n, base)
        job, cell, agent = bench_agent(n, base)
        return {"harness": harness, "agent": agent, "judge": bench_judge(job, cell)}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="20,000 files (a smoke run)")
    ap.add_argument("--files", type=int, default=400_000)
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the job dirs are made")
    ap.add_argument("--only", choices=["harness", "agent"], help="one part (agent includes judge)")
    args = ap.parse_args()
    n = 20_000 if args.quick else args.files
    print(f"evidence: {n} files under {args.dir}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    base = Path(tempfile.mkdtemp(prefix="ptb-bench-evidence-", dir=args.dir))
    try:
        if args.only in (None, "harness"):
            bench_harness(n, base)
        if args.only in (None, "agent"):
            job, cell, _ = bench_agent(n, base)
            bench_judge(job, cell)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    from ptb_harness.stages.evidence_recorder import peak_rss_kb

    print(f"(bench process peak RSS {peak_rss_kb() / 1024:.0f} MiB: save_agent_files runs in it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
