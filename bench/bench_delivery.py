"""Delivery of what an agent left, before (cec4b27) and after the file-count caps and the
one-sync delivery, in one run: final_model across filesystems (node-local scratch ->
the results dir) and the kept agent files, each of 10,000 and 400,000 small files.

    python bench/bench_delivery.py [--quick] [--scratch /dev/shm] [--results /tmp]

"Before" is the code of commit cec4b27 itself (read with `git show`, so nothing is
copied here): final_model walked whole, then copied file by file (no sync: not durable,
and a crash mid-copy left half a final_model), the agent files written with an fsync
each. "After" is the code now: counted while walked (refused at the first entry over
the cap), copied beside the target, synced once, renamed; the agent files written plain
into a hidden dir, synced once, renamed. The source trees are made on a tmpfs (the
scratch), as hard links of one file: 400,000 names in seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
BEFORE = "cec4b27"
DIRS = 100


#: where the "before" sources may be given as files instead (a machine without the history)
BEFORE_DIR = os.environ.get("PTB_BENCH_BEFORE_DIR")


def _module_at(commit: str, path: str, name: str) -> ModuleType:
    if BEFORE_DIR:
        source = Path(BEFORE_DIR, Path(path).name).read_text()
    else:
        cmd = ["git", "-C", str(REPO), "show", f"{commit}:{path}"]
        source = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    exec(compile(source, f"{commit}:{path}", "exec"), module.__dict__)  # the harness's own code, as it was
    return module


def make_tree(root: Path, n: int, text: bytes = b"step,loss\n1,0.5\n") -> Path:
    """n files (hard links of one) in DIRS directories under root."""
    root.mkdir(parents=True)
    (root / "seed.txt").write_bytes(text)
    top = os.open(root, os.O_RDONLY)
    dirs = []
    for d in range(DIRS):
        (root / f"d{d:03d}").mkdir()
        dirs.append(os.open(root / f"d{d:03d}", os.O_RDONLY))
    for i in range(n - 1):
        os.link("seed.txt", f"f{i:06d}.txt", src_dir_fd=top, dst_dir_fd=dirs[i % DIRS])
    for fd in [top, *dirs]:
        os.close(fd)
    return root


def timed(fn) -> float:
    os.sync()  # what making the trees (or an earlier step) left dirty is not this step's to flush
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_final_model(n: int, scratch: Path, results: Path) -> list[tuple[str, float]]:
    from ptb_harness.runtime.delivery import deliver_tree

    old = _module_at(BEFORE, "src/ptb_harness/runtime/delivery.py", "delivery_before")
    rows = []
    src = make_tree(scratch / "fm-before" / "final_model", n)
    dst = results / "fm-before" / "final_model"
    rows.append(("before", timed(lambda: old.deliver_tree(src, dst, label="final_model", max_bytes=10**12))))
    assert sum(1 for _ in dst.rglob("*.txt")) == n
    src = make_tree(scratch / "fm-after" / "final_model", n)
    dst = results / "fm-after" / "final_model"
    args = {"label": "final_model", "max_bytes": 10**12}
    rows.append(("after", timed(lambda: deliver_tree(src, dst, max_files=n + DIRS, **args))))
    assert sum(1 for _ in dst.rglob("*.txt")) == n
    if n > 10_000:
        src = make_tree(scratch / "fm-cap" / "final_model", n)
        dst = results / "fm-cap" / "final_model"
        got = []
        rows.append(("after, refused at the default cap (10,000)", timed(lambda: got.append(
            deliver_tree(src, dst, max_files=10_000, **args)))))  # fmt: skip
        assert got[0].problem and "more than 10000" in got[0].problem
    return rows


def bench_agent_files(n: int, scratch: Path, results: Path) -> list[tuple[str, float]]:
    from ptb_harness.stages.agent_files import save_agent_files
    from ptb_harness.traces.redact import Redactor

    old = _module_at(BEFORE, "src/ptb_harness/stages/agent_files.py", "agent_files_before")
    task = scratch / "task"  # the task's own files: none here, every file is the agent's
    rows = []
    home = make_tree(scratch / "before" / "home", n)
    rows.append(("before", timed(lambda: old.save_agent_files(home, task, results / "before", Redactor({}), 10**9))))
    home = make_tree(scratch / "after" / "home", n)
    args = (home, task, results / "after", Redactor({}), 10**9)
    rows.append(("after", timed(lambda: save_agent_files(*args, max_files=n + DIRS + 10))))
    if n > 200_000:
        args = (home, task, results / "cap", Redactor({}), 10**9, 200_000)
        rows.append(("after, refused at the default cap (200,000)", timed(lambda: save_agent_files(*args))))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1,000 and 20,000 files (a smoke run)")
    ap.add_argument("--scratch", default="/dev/shm", help="where the agent's trees are made (a tmpfs)")
    ap.add_argument("--results", default=tempfile.gettempdir(), help="where they are delivered (a disk)")
    ap.add_argument("--sizes", type=int, nargs="+", help="file counts (default 10,000 and 400,000)")
    ap.add_argument("--only", choices=["final_model", "agent_files"], help="one of the two deliveries")
    args = ap.parse_args()
    sizes = args.sizes or ((1_000, 20_000) if args.quick else (10_000, 400_000))
    print(f"delivery: scratch {args.scratch}, results {args.results}, {os.cpu_count()} cores", flush=True)
    for n in sizes:
        for what, bench in (("final_model", bench_final_model), ("agent_files", bench_agent_files)):
            if args.only and what != args.only:
                continue
            scratch = Path(tempfile.mkdtemp(prefix="ptb-bench-src-", dir=args.scratch))
            results = Path(tempfile.mkdtemp(prefix="ptb-bench-dst-", dir=args.results))
            try:
                rows = bench(n, scratch, results)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
                shutil.rmtree(results, ignore_errors=True)
            before = rows[0][1]
            for label, seconds in rows:
                print(f"  {what:<11} {n:>7} files  {label:<44} {seconds:8.2f} s  after/before {seconds / before:6.3f}",
                      flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "src"))
    sys.exit(main())
