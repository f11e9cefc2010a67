"""Trace parsing throughput against its floor, measured in one run.

    python bench/bench_traces.py [--mb 500] [--dir /tmp] [--multiline]

Generates a Claude Code stream-json trace of --mb MB (timestamp prefixes, noise lines,
long tool results: one line each, or 60 with --multiline), then times, each in a fresh
process (peak RSS is per process):
  floor: a bare loop of json.loads over every line's JSON
  ours:  ptb_harness.traces.parse_trace_file with both sanitized companions and 10 secrets
and prints MB/s, the ratio ours/floor and peak RSS. Writes bench/results/traces.{csv,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
SECRETS = {f"SECRET_{i}_API_KEY": f"sk-bench-{i:02d}-" + "q" * (10 + i) for i in range(10)}

FLOOR = """
import json, sys
n = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        i = line.find(b"{")
        if i >= 0:
            try:
                json.loads(line[i:])
                n += 1
            except ValueError:
                pass
print(n)
"""

OURS = """
import json, sys
from pathlib import Path
from ptb_harness.traces import parse_trace_file
out = Path(sys.argv[2])
s = parse_trace_file(Path(sys.argv[1]), out / "parsed.txt", sanitized_raw=out / "raw_s.txt",
                     sanitized_parsed=out / "parsed_s.txt", secrets=json.loads(sys.argv[3]))
print(s.rendered_events)
"""


def generate(path: Path, mb: int, multiline: bool = False) -> int:
    stamp = "[2026-11-29T10:00:00Z] "
    # --multiline: a tool's output of 60 lines (each a continuation line in the transcript)
    step = "step 100 loss 0.52\n" if multiline else "step 100 loss 0.52 "
    events = [
        {"type": "assistant", "parent_tool_use_id": None, "session_id": "s",
         "message": {"id": "msg_1", "model": "m",
                     "content": [{"type": "text", "text": "Next I will run the training script " * 8}],
                     "usage": {"input_tokens": 1000, "output_tokens": 100}}},
        {"type": "assistant", "parent_tool_use_id": None, "session_id": "s",
         "message": {"id": "msg_2", "model": "m", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                                                "input": {"command": "python train.py --lr 1e-4"}}]}},
        {"type": "user", "parent_tool_use_id": None, "session_id": "s",
         "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                  "content": (step * 60) + SECRETS["SECRET_3_API_KEY"]}]}},
    ]  # fmt: skip
    block = "".join(stamp + json.dumps(e) + "\n" for e in events) + stamp + "Epoch 1: 100%|##########| 10/10\n"
    data = block.encode()
    target = mb * 10**6
    with open(path, "wb") as f:
        f.write(
            (
                stamp
                + json.dumps({"type": "system", "subtype": "init", "claude_code_version": "2", "tools": []})
                + "\n"
            ).encode()
        )
        written = 0
        chunk = data * 1000
        while written < target:
            f.write(chunk)
            written += len(chunk)
    return path.stat().st_size


def run(code: str, *args: str) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MB of it or any child, CPU seconds of it and its children)
    of a fresh process running code."""
    wrapper = (
        "import sys, time\n"
        f"sys.argv = ['x', *{list(args)!r}]\n"
        "t = time.perf_counter()\n"
        f"exec(compile({code!r}, 'bench', 'exec'))\n"
        "print('SECONDS', time.perf_counter() - t)\n"
        # VmHWM: this address space's peak (ru_maxrss would include the parent's, across exec)
        "print('RSS', next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))\n"
        # the redacting children it forked: their own peak (KiB) and all CPU time used
        "import os, resource\n"
        "print('CHILD_RSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "t = os.times()\n"
        "print('CPU', t.user + t.system + t.children_user + t.children_system)\n"
    )
    out = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, check=True).stdout
    vals = dict(line.split() for line in out.splitlines() if line.startswith(("SECONDS", "RSS", "CHILD_RSS", "CPU")))
    return float(vals["SECONDS"]), max(int(vals["RSS"]), int(vals["CHILD_RSS"])) / 1024, float(vals["CPU"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--multiline", action="store_true", help="tool outputs of 60 lines, not one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        raw = Path(d) / "trace.txt"
        t0 = time.perf_counter()
        size = generate(raw, args.mb, args.multiline)
        print(f"generated {size / 1e6:.0f} MB in {time.perf_counter() - t0:.1f} s")
        floor_s, floor_rss, floor_cpu = run(FLOOR, str(raw))
        ours_s, ours_rss, ours_cpu = run(OURS, str(raw), d, json.dumps(SECRETS))
    mb = size / 1e6
    rows = [
        ("bare json.loads per line (floor)", floor_s, mb / floor_s, floor_rss, 1.0, floor_cpu),
        ("detect + parse + sanitize (ours)", ours_s, mb / ours_s, ours_rss, floor_s / ours_s, ours_cpu),
    ]
    RESULTS.mkdir(exist_ok=True)
    lines = [
        "| what | seconds | MB/s | peak RSS MB | speed vs floor "
        f"| CPU seconds (all processes), {os.cpu_count()} cores |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {w} | {s:.1f} | {r:.0f} | {rss:.0f} | {x:.2f} | {c:.1f} |" for w, s, r, rss, x, c in rows]
    table = "\n".join(lines)
    print(f"trace of {mb:.0f} MB\n{table}")
    (RESULTS / "traces.md").write_text(f"Trace of {mb:.0f} MB, {time.strftime('%Y-%m-%d')}\n\n{table}\n")
    (RESULTS / "traces.csv").write_text(
        "what,seconds,mb_per_s,peak_rss_mb,speed_vs_floor,cpu_seconds\n"
        + "".join(f"{w},{s:.2f},{r:.1f},{rss:.0f},{x:.3f},{c:.2f}\n" for w, s, r, rss, x, c in rows)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
