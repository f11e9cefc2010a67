"""The agent's files kept for the judge: no weights, no links, no caches, capped, sanitized."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ptb_harness.stages.agent_files import save_agent_files
from ptb_harness.traces.redact import Redactor

SECRET = "sk-ant-secret-value-0123456789abcdefgh"


def test_kept_files(tmp_path: Path):
    task = tmp_path / "task_src"
    task.mkdir()
    (task / "evaluate.py").write_text("original\n")
    (task / "info.json").write_text("{}")
    home = tmp_path / "home"
    (home / "task").mkdir(parents=True)
    (home / "task" / "evaluate.py").write_text("original\n")  # unchanged copy: left out
    (home / "task" / "info.json").write_text('{"edited": true}')  # changed by the agent: kept
    (home / "task" / "final_model").mkdir()
    (home / "task" / "final_model" / "config.json").write_text("{}")
    (home / "solve.sh").write_text("harness's\n")
    (home / "agent").mkdir()
    (home / "agent" / "cli.js").write_text("payload\n")
    (home / ".cache" / "huggingface").mkdir(parents=True)
    (home / ".cache" / "huggingface" / "big.txt").write_text("cache\n")
    (home / "train.py").write_text(f"KEY = '{SECRET}'\n")
    (home / "data.jsonl").write_text("x" * 500)
    (home / "big.jsonl").write_text("y" * 5000)
    (home / "ckpt").mkdir()
    (home / "ckpt" / "model.safetensors").write_bytes(b"w" * 10)
    (home / "shards.arrow").write_bytes(b"ARROW1\0\0data")
    os.symlink("/etc/passwd", home / "passwd")
    cell = tmp_path / "cell"
    record = save_agent_files(home, task, cell, Redactor({"ANTHROPIC_API_KEY": SECRET}), max_bytes=1000, max_files=100)
    saved = {s["path"] for s in record["saved"]}
    assert saved == {"task/info.json", "train.py", "data.jsonl"}
    why = {s["path"]: s["why"] for s in record["skipped"]}
    assert why["ckpt/model.safetensors"] == "weights"
    assert why["shards.arrow"] == "binary"
    assert why["passwd"] == "a link or not a regular file"
    assert why["big.jsonl"].startswith("over the cap")
    assert (cell / "agent_files" / "train.py").read_text() == "KEY = '[REDACTED:ANTHROPIC_API_KEY]'\n"
    assert record["redactions"] == {"[REDACTED:ANTHROPIC_API_KEY]": 1}
    assert json.loads((cell / "agent_files.json").read_text())["saved"] == record["saved"]
    assert not any(SECRET.encode() in p.read_bytes() for p in cell.rglob("*") if p.is_file())


def test_a_job_dir_of_too_many_files_is_refused_as_walked(tmp_path: Path):
    home = tmp_path / "home"
    (home / "task" / "many").mkdir(parents=True)
    for i in range(300):
        (home / "task" / "many" / f"f{i}").write_text("x")
    (home / ".cache").mkdir()
    for i in range(300):  # caches are not the agent's files: not counted
        (home / ".cache" / f"c{i}").write_text("x")
    record = save_agent_files(home, tmp_path / "task_src", tmp_path / "cell", Redactor({}), 10**6, max_files=400)
    assert record["problem"] is None and len(record["saved"]) == 300
    record = save_agent_files(home, tmp_path / "task_src", tmp_path / "cell", Redactor({}), 10**6, max_files=250)
    assert record["problem"] == "the agent left more than 250 files and directories in its job dir (caches aside)"
    assert record["saved"] == [] and record["skipped"] == []  # refused before any file is opened
    assert sorted(p.name for p in (tmp_path / "cell").iterdir()) == ["agent_files", "agent_files.json"]


def test_the_record_stays_under_its_read_bound_with_many_long_names(tmp_path: Path):
    """6,000 files with 3,800-character paths (15 nested 250-character dirs): listed whole,
    the record would be about 24 MB, over the 16 MiB it is read with; past its budgets
    left-out files are only counted, by reason."""
    from ptb_harness.core.records import MAX_RECORD_BYTES, read_json_dict

    home = tmp_path / "home"
    deep = home.joinpath(*[f"{d:02d}" + "n" * 248 for d in range(15)])
    deep.mkdir(parents=True)
    dir_fd = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
    for i in range(6000):  # empty: .bin ones are left out as weights, .txt ones kept
        os.close(os.open(f"{i:05d}.{'bin' if i % 2 else 'txt'}", os.O_CREAT | os.O_WRONLY, dir_fd=dir_fd))
    os.close(dir_fd)
    record = save_agent_files(home, tmp_path / "task_src", tmp_path / "cell", Redactor({}), 10**6, 100_000)
    size = (tmp_path / "cell" / "agent_files.json").stat().st_size
    assert size < MAX_RECORD_BYTES * 0.8, size
    back = read_json_dict(tmp_path / "cell" / "agent_files.json")
    assert back is not None and back["saved"] == record["saved"]
    counted = len(back["saved"]) + len(back["skipped"]) + sum(back["skipped_uncounted"].values())
    assert counted == 6000 and back["skipped_uncounted"]["weights"] > 0
    assert len(list((tmp_path / "cell" / "agent_files").rglob("*.txt"))) == len(back["saved"])
