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
    record = save_agent_files(home, task, cell, Redactor({"ANTHROPIC_API_KEY": SECRET}), max_bytes=1000)
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
