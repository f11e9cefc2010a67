"""Atomicity under kill -9: the evaluate stage (and the writer it uses) is SIGKILLed at
random points, again and again; a metrics.json that exists is always complete and valid."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import campaign_config, make_workdir, write_config, write_task

from ptb_harness.core.records import check_metrics

pytestmark = pytest.mark.slow

# A scorer whose metrics.json is big (5 MB of per-sample results): writing it takes long
# enough for kills to land inside the write.
BIG_SCORER = """
    import argparse, json, pathlib
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path"); ap.add_argument("--json-output-file"); ap.add_argument("--max-tokens")
    a = ap.parse_args()
    # ~0.9 MB: as large as a metrics.json may be (MAX_METRICS_BYTES, 1 MiB), a long write
    samples = [{"id": i, "output": "x" * 90} for i in range(8_500)]
    pathlib.Path(a.json_output_file).write_text(json.dumps({"accuracy": 0.625, "samples": samples}))
"""
DRIVER = """
import sys
from pathlib import Path
from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.config import load_config_files
from ptb_harness.stages.evaluate import run_evaluate
cell_dir = Path(sys.argv[2])
campaign = load_config_files(sys.argv[1])
run_evaluate(campaign, Cell("exit0", "big", "m1", "0.0005", 0, 1), solve_json=cell_dir / "solve.json",
             final_model=cell_dir / "final_model", metrics_json=cell_dir / "metrics.json")
"""
WRITER = """
import sys
from ptb_harness.core.records import atomic_write_bytes
data = open(sys.argv[2], "rb").read()
print("ready", flush=True)
while True:
    atomic_write_bytes(sys.argv[1], data)
"""


def _check(path, expected_sha: str | None) -> str:
    """'absent' or 'complete'; fails on anything else."""
    if not path.exists():
        return "absent"
    data = path.read_bytes()
    metrics, why = check_metrics(data)
    assert metrics is not None, f"a metrics.json that is not valid: {why} ({len(data)} bytes)"
    if expected_sha is not None:
        assert hashlib.sha256(data).hexdigest() == expected_sha, "a valid-looking but different metrics.json"
    return "complete"


def test_sigkill_of_the_evaluate_stage_at_random_points(tmp_path):
    root = make_workdir(tmp_path / "campaign")
    write_task(root, "big", BIG_SCORER)
    write_config(root, campaign_config(tasks=["big"]))
    cell = root / "results" / "cells" / "exit0" / "big" / "m1" / "0.0005h-0gpu-run1"
    (cell / "final_model").mkdir(parents=True)
    (cell / "final_model" / "config.json").write_text("{}")
    (cell / "solve.json").write_text(json.dumps({"final_model_files": 1, "description": "exited with code 0"}))
    # clean runs: how long the stage takes, and the bytes a complete metrics.json has; the
    # shortest of two, since the first also pays for cold caches (and on a loaded machine a
    # long first run aimed every kill past the write)
    runs = []
    for _ in range(2):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", DRIVER, str(root), str(cell)], check=True, capture_output=True)
        runs.append(time.monotonic() - t0)
    full = min(runs)
    expected = hashlib.sha256((cell / "metrics.json").read_bytes()).hexdigest()
    rng = random.Random(8)
    seen = {"absent": 0, "complete": 0}
    for _ in range(30):
        (cell / "metrics.json").unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(root), str(cell)], stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.5, 1.1) * full)  # the write comes at the end: aim there
        proc.kill()  # SIGKILL
        proc.wait()
        seen[_check(cell / "metrics.json", expected)] += 1
        # no temp file of the write is mistaken for anything: they are dot-files, never metrics.json
    assert seen["absent"] and seen["complete"], seen  # kills landed on both sides of the rename


def test_sigkill_of_the_writer_mid_write(tmp_path):
    """The writer alone, rewriting a 0.9 MB metrics.json (near the 1 MiB limit) in a loop,
    killed at random times."""
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps({"accuracy": 0.5, "samples": ["y" * 100] * 8_500}))
    expected = hashlib.sha256(payload.read_bytes()).hexdigest()
    target = tmp_path / "metrics.json"
    rng = random.Random(9)
    for _ in range(30):
        target.unlink(missing_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(WRITER), str(target), str(payload)], stdout=subprocess.PIPE
        )
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0, 0.05))
        proc.kill()
        proc.wait()
        _check(target, expected)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name not in ("payload.json", "metrics.json")]
    assert all(name.startswith(".") for name in leftovers)  # only hidden temp files, never a torn metrics.json
