"""The evidence recorder as the solve runs it (a process of its own, inotify, its walks)
on a job dir that a test writes into the way an agent would: every file written is read,
wherever and however briefly it lived; the harness's own files are not the agent's; a
file it cannot read in full makes the record incomplete; the test set's own places
(its dataset cache, the scorer's logs) hold the test set without counting."""

from __future__ import annotations

import gzip
import io
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ptb_harness.runtime.procs import read_proc_stat
from ptb_harness.stages.evidence import JudgedSamples, RecorderProcess
from ptb_harness.stages.evidence_recorder import WAIT_MAX_S, RecorderConfig, next_wait

QUESTIONS = [
    f"In week {i} a baker made {17 * i + 5} loaves of rye bread and sold {3 * i + 2} of them each morning "
    f"before noon; how many loaves of rye were left on day {i + 9} of that week?"
    for i in range(30)
]
COPY = "\n".join(QUESTIONS) + "\n"
SPEC = {"hf_dataset": "acme/bakery", "split": "test", "fields": ["question"]}


def record(
    tmp_path: Path, write: Callable[[Path], None], harness: Callable[[Path], None] | None = None, **knobs
) -> dict:
    """Run the recorder around write(job_root) and return evidence.json (harness(job_root)
    puts the harness's files in first)."""
    job, cell = tmp_path / "job", tmp_path / "cell"
    for d in (job / "home" / "task", job / "tmp", cell):
        d.mkdir(parents=True, exist_ok=True)
    if harness:
        harness(job)
    config = RecorderConfig(
        job_root=str(job), roots=["home", "tmp"], out_dir=str(cell), test_set_spec=SPEC, scan_seconds=1, **knobs
    )
    recorder = RecorderProcess(config, JudgedSamples(QUESTIONS), cell, os.environ)
    try:
        write(job)
    finally:
        problem = recorder.stop(cell / "evidence.json")
    assert problem is None, problem
    return json.loads((cell / "evidence.json").read_text())


def index_lines(tmp_path: Path) -> list[dict]:
    with gzip.open(tmp_path / "cell" / "evidence_index.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def findings(evidence: dict) -> dict[str, dict]:
    return {f["path"]: f for f in evidence["findings"]}


def test_the_loop_blocks_until_its_next_deadline_and_never_spins():
    """The loop's wait, on one clock: with nothing held it blocks until the next scan (at
    most WAIT_MAX_S at once); a held path's window that ends sooner shortens it; a deadline
    past is a wait of 0, never negative."""
    now = 5_000.0  # a monotonic reading: seconds since boot, nowhere near the epoch
    assert next_wait(now, now + 30, []) == WAIT_MAX_S
    assert next_wait(now, now + 0.5, []) == 0.5
    assert next_wait(now, now + 30, [now + 0.25, now + 0.75]) == 0.25
    assert next_wait(now, now - 1, []) == 0.0
    assert next_wait(now, now + 30, [now - 3]) == 0.0
    assert 0 < next_wait(time.monotonic(), time.monotonic() + 1, []) <= 1


def test_an_idle_recorder_sleeps(tmp_path: Path):
    """The real recorder process on a job dir where nothing happens uses almost no CPU: it
    blocks on inotify between its deadlines (a loop that never blocked used a whole core).
    Its CPU time is what is measured, not wall time, so load beside it does not flake it."""
    job, cell = tmp_path / "job", tmp_path / "cell"
    for d in (job / "home", job / "tmp", cell):
        d.mkdir(parents=True)
    config = RecorderConfig(job_root=str(job), roots=["home", "tmp"], out_dir=str(cell), scan_seconds=1)
    recorder = RecorderProcess(config, JudgedSamples(QUESTIONS), cell, os.environ)
    try:
        before, t0 = read_proc_stat(recorder.pid), time.monotonic()
        time.sleep(3)
        after, wall = read_proc_stat(recorder.pid), time.monotonic() - t0
    finally:
        assert recorder.stop(cell / "evidence.json") is None
    assert before is not None and after is not None
    share = (after.cpu_seconds - before.cpu_seconds) / wall
    assert share < 0.05, f"the idle recorder used {share:.0%} of a core"


def test_every_file_the_agent_wrote_is_read_wherever_and_however_briefly(tmp_path: Path):
    def harness(job: Path) -> None:
        (job / "home" / "agent").mkdir()
        (job / "home" / "agent" / "cli.js").write_text("// payload\n")
        (job / "home" / "task" / "test.jsonl").write_text(COPY)  # the harness's copy: not the agent's
        (job / "home" / "task" / "evaluate.py").write_text("print('eval')\n")

    def agent(job: Path) -> None:
        home = job / "home"
        (home / "agent" / "cli.js").write_text("// payload\n" + COPY)  # the payload dir, changed
        (home / "deep" / ".cache" / "x").mkdir(parents=True)  # made and written at once
        (home / "deep" / ".cache" / "x" / "a.bin").write_text(COPY)
        (home / "brief.txt").write_text(COPY)
        time.sleep(0.05)
        (home / "brief.txt").unlink()  # deleted 50 ms after it was closed
        # never closed while the recorder runs: the final scan reads it
        kept_open = open(home / "open.txt", "w")  # noqa: SIM115
        kept_open.write(COPY)
        kept_open.flush()
        (home / "locked.txt").write_text("")
        time.sleep(0.2)
        (home / "locked.txt").write_text(COPY)
        os.chmod(home / "locked.txt", 0)  # unreadable at the end: the final scan lifts it
        time.sleep(0.3)

    evidence = record(tmp_path, agent, harness)
    found = findings(evidence)
    assert evidence["complete"], evidence["incomplete"]
    assert evidence["contamination"]["found_count"] == len(QUESTIONS)
    assert set(found) >= {"home/agent/cli.js", "home/deep/.cache/x/a.bin", "home/brief.txt", "home/open.txt"}
    assert found["home/brief.txt"]["gone"] and not found["home/agent/cli.js"]["gone"]
    assert "home/locked.txt" in found
    read = {line["path"] for line in index_lines(tmp_path)}
    assert "home/task/test.jsonl" not in read and "home/task/evaluate.py" not in read  # the harness's
    assert evidence["counts"]["baseline_files"] == 3


def test_a_log_written_over_and_over_is_read_from_where_it_ended_unless_its_start_changed(tmp_path: Path):
    def agent(job: Path) -> None:
        log = job / "home" / "train.log"
        for step in range(400):
            with open(log, "a") as f:
                f.write(f"step {step} loss {1 / (step + 1):.4f} " + "x" * 1000 + "\n")
            if step == 300:  # its start overwritten in place: only the appends are new, it seems
                with open(log, "r+") as f:
                    f.write(COPY)
            time.sleep(0.005)

    evidence = record(tmp_path, agent)
    lines = [line for line in index_lines(tmp_path) if line["path"] == "home/train.log"]
    assert evidence["contamination"]["found_count"] == len(QUESTIONS)
    assert len(lines) < 40  # 400 writes, debounced
    assert any(line.get("from") for line in lines)  # read from its old end, not again whole


def test_what_cannot_be_read_in_full_makes_the_record_incomplete(tmp_path: Path):
    def agent(job: Path) -> None:
        (job / "home" / "big.txt").write_text("pad " * 100_000 + COPY)
        for i in range(30):
            (job / "tmp" / f"f{i}").write_text("x")

    evidence = record(tmp_path, agent, file_max_bytes=100_000, max_files=20)
    assert not evidence["complete"]
    why = " ".join(evidence["incomplete"])
    assert "more than 20 files and directories" in why
    assert "home/big.txt" in why and "100000-byte bound" in why


def bombs(home: Path, expands_to: int) -> None:
    """An Arrow file (one zstd buffer, 33 KB) and a Parquet file (one dictionary entry
    repeated, under 1 KB; its metadata says 1 MB of columns) that each decode to
    expands_to bytes of zeros; written from an untouched buffer (zero pages: the test
    process never holds them)."""
    zeros = pa.allocate_buffer(expands_to, memory_pool=pa.system_memory_pool())
    offsets = pa.py_buffer(pa.array([0, expands_to], pa.int64()).buffers()[1])
    one = pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, zeros])
    options = ipc.IpcWriteOptions(compression="zstd")
    with ipc.new_file(str(home / "data.arrow"), pa.schema([("text", pa.large_binary())]), options=options) as w:
        w.write_batch(pa.record_batch([one], names=["text"]))
    rows = expands_to >> 20
    offsets = pa.py_buffer(pa.array([i << 20 for i in range(rows + 1)], pa.int64()).buffers()[1])
    many = pa.Array.from_buffers(pa.large_binary(), rows, [None, offsets, zeros])
    pq.write_table(pa.table({"text": many}), str(home / "data.parquet"), compression="zstd")


def test_a_decompression_bomb_stops_at_the_recorder_s_memory_cap(tmp_path: Path, capfd):
    """Arrow and Parquet files of a few KB that decode to 1 GiB each, beside a file of
    test samples, against the real recorder capped at 256 MiB by the test: it stays under
    its cap, the record is incomplete naming the cap for both (judge_failed), everything
    else is read (the samples found) and it says nothing (no traceback)."""
    cap = 256 << 20

    def agent(job: Path) -> None:
        # made outside the recorder's roots, then renamed in: each bomb appears whole, so
        # no scan catches one half-written (a transient read error the test is not about)
        staging = job / "staging"
        staging.mkdir()
        bombs(staging, 1 << 30)
        for name in ("data.arrow", "data.parquet"):
            os.rename(staging / name, job / "home" / name)
        (job / "home" / "train.txt").write_text(COPY)

    evidence = record(tmp_path, agent, memory_max_bytes=cap)
    assert (tmp_path / "job" / "home" / "data.arrow").stat().st_size < 40_000
    assert not evidence["complete"] and evidence["memory_max_bytes"] == cap
    (why,) = evidence["incomplete"]
    over = "over the recorder's memory cap (256 MiB, site.evidence_memory_mb)"
    assert why.startswith("2 file(s) not read in full")
    assert f"home/data.arrow: home/data.arrow: {over} reading it as arrow" in why
    assert f"home/data.parquet: home/data.parquet: {over} reading it as parquet" in why
    assert evidence["max_rss_kb"] << 10 < cap
    assert evidence["contamination"]["found_count"] == len(QUESTIONS)
    assert "Traceback" not in capfd.readouterr().err


def _arrow(rows: list[dict]) -> bytes:
    table = pa.Table.from_pylist(rows)
    buf = io.BytesIO()
    with ipc.new_stream(buf, table.schema) as w:
        w.write_table(table)
    return buf.getvalue()


def test_the_test_sets_own_places_hold_it_without_counting_unless_mixed(tmp_path: Path):
    cache = "home/.cache/huggingface/datasets/acme___bakery/default/0.0.0/abc"

    def loads_the_dataset(job: Path) -> None:
        (job / cache).mkdir(parents=True)
        (job / cache / "bakery-test.arrow").write_bytes(_arrow([{"question": q, "answer": "1"} for q in QUESTIONS]))
        logs = job / "tmp" / "ptb-inspect-logs-x1"
        logs.mkdir()
        (logs / "run.json").write_text(json.dumps({"eval": {"task": "bakery"}, "samples": [{"input": COPY}]}))

    evidence = record(tmp_path, loads_the_dataset)
    assert evidence["complete"] and evidence["contamination"]["found_count"] == 0
    assert evidence["contamination"]["in_test_set_places"] == len(QUESTIONS)
    assert {f["place"] for f in evidence["findings"]} == {
        "the test dataset's cache",
        "the task scorer's evaluation logs",
    }

    def mixes_it_in(job: Path) -> None:
        (job / cache).mkdir(parents=True)
        own = [{"question": f"my own bread question number {i} with enough words to be one record"} for i in range(9)]
        (job / cache / "train-mix.arrow").write_bytes(_arrow([*own, *({"question": q} for q in QUESTIONS)]))

    evidence = record(tmp_path / "mixed", mixes_it_in)
    assert evidence["contamination"]["found_count"] == len(QUESTIONS)
    (finding,) = evidence["findings"]
    assert finding["counted"] and finding["place"] == "the test dataset's cache"
