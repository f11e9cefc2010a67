"""The agent's own files (code, data, logs; no weights), kept from the scratch job dir
beside the cell for the judge, before the scratch goes.

Size-capped (the largest files are dropped first, and listed), text only (a file with a
NUL byte in its first block is binary: weights, arrow shards, images), sanitized with
the same redactions as the trace, never following a link. What was kept and what was
not is in ``agent_files.json``. A failure here is logged, never a reason to lose the
agent's model or trace (the judge then says the files are missing).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from ptb_harness.core.cell_files import AGENT_FILES, AGENT_FILES_RECORD, FINAL_MODEL
from ptb_harness.core.records import atomic_write_bytes, atomic_write_json
from ptb_harness.traces.redact import Redactor

log = logging.getLogger("ptb_harness.stages.agent_files")

#: model weights and checkpoints, by suffix: never copied, whatever their size
WEIGHT_SUFFIXES = frozenset(
    {".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".onnx", ".h5", ".msgpack", ".npy", ".npz", ".pkl"}
)
#: directories of the job's HOME that are caches or the harness's copies, not the agent's work
SKIP_DIRS = frozenset({".cache", ".npm", ".local", ".config", ".triton", "__pycache__", ".git", FINAL_MODEL})
#: files the harness itself put in HOME
HARNESS_FILES = frozenset({"solve.sh", "timer.sh", "prompt.txt"})
MAX_FILE_BYTES = 20 * 1024 * 1024


def _is_text(path: Path) -> bool:
    with open(path, "rb") as f:
        return b"\0" not in f.read(8192)


def _same_as(path: Path, original: Path) -> bool:
    try:
        return (
            original.is_file()
            and original.stat().st_size == path.stat().st_size
            and original.read_bytes() == path.read_bytes()
        )
    except OSError:
        return False


def candidates(home: Path, task_dir: Path) -> tuple[list[tuple[Path, int]], list[dict[str, Any]]]:
    """(files to keep with sizes, files left out with why): the agent's HOME without
    caches, links, weights, binaries, the harness's own files and unchanged task files."""
    keep: list[tuple[Path, int]] = []
    skipped: list[dict[str, Any]] = []
    for dirpath, dirs, names in os.walk(home):
        here = Path(dirpath)
        rel_dir = here.relative_to(home)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not (here / d).is_symlink())
        if rel_dir == Path("agent"):  # the agent's payload: the harness copied it in
            dirs[:] = []
            continue
        for name in sorted(names):
            p = here / name
            rel = p.relative_to(home)
            if rel_dir == Path(".") and name in HARNESS_FILES:
                continue
            if rel.parts[0] == "task" and _same_as(p, task_dir / Path(*rel.parts[1:])):
                continue
            if p.is_symlink() or not p.is_file():
                skipped.append({"path": str(rel), "why": "a link or not a regular file"})
                continue
            size = p.stat().st_size
            if p.suffix.lower() in WEIGHT_SUFFIXES:
                skipped.append({"path": str(rel), "bytes": size, "why": "weights"})
            elif size > MAX_FILE_BYTES:
                skipped.append({"path": str(rel), "bytes": size, "why": f"larger than {MAX_FILE_BYTES} bytes"})
            elif not _is_text(p):
                skipped.append({"path": str(rel), "bytes": size, "why": "binary"})
            else:
                keep.append((p, size))
    return keep, skipped


def save_agent_files(home: Path, task_dir: Path, cell_dir: Path, redactor: Redactor, max_bytes: int) -> dict:
    """Copy the agent's files into <cell>/agent_files/ (sanitized), smallest first up to
    max_bytes; write agent_files.json. Returns that record."""
    out = cell_dir / AGENT_FILES
    if out.exists():
        shutil.rmtree(out)
    keep, skipped = candidates(home, task_dir)
    saved, total = [], 0
    for p, size in sorted(keep, key=lambda x: (x[1], str(x[0]))):
        rel = p.relative_to(home)
        if total + size > max_bytes:
            skipped.append({"path": str(rel), "bytes": size, "why": f"over the cap of {max_bytes} bytes in all"})
            continue
        data = redactor(p.read_bytes())
        atomic_write_bytes(out / rel, data, 0o600)
        total += size
        saved.append({"path": str(rel), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    record = {
        "dir": AGENT_FILES,
        "saved": saved,
        "skipped": sorted(skipped, key=lambda s: s["path"]),
        "bytes": total,
        "max_bytes": max_bytes,
        "redactions": dict(redactor.hits),
    }
    atomic_write_json(cell_dir / AGENT_FILES_RECORD, record)
    return record
