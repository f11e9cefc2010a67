"""The agent's own files (code, data, logs; no weights), kept from the scratch job dir
beside the cell for the judge, before the scratch goes.

Size-capped (the largest files are dropped first, and listed), text only (a file with a
NUL byte in its first block is binary: weights, arrow shards, images), sanitized with
the same redactions as the trace, never following a link. Counted while walked: a job
dir with more than ``max_files`` entries of the agent's own is not walked further, and
that is an agent outcome (the judge could not see its files). What was kept and what was
not is in ``agent_files.json``, which stays far below the harness's 16 MiB read bound
whatever the count: past a byte budget, left-out files are only counted, by reason.
The kept files are written without an fsync each, into a hidden dir synced once and
renamed into place. A failure here is logged, never a reason to lose the agent's model
or trace (the judge then says the files are missing).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptb_harness.core.cell_files import AGENT_FILES, AGENT_FILES_RECORD, FINAL_MODEL
from ptb_harness.core.records import atomic_write_json, sync_filesystem
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
#: how much of agent_files.json may list kept files, and left-out ones (its JSON text);
#: together well under core.records.MAX_RECORD_BYTES (16 MiB), the bound it is read with
SAVED_LIST_BYTES = 8 * 2**20
SKIPPED_LIST_BYTES = 4 * 2**20


def _open(path: Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_NOFOLLOW)


def _is_text(path: Path) -> bool:
    with os.fdopen(_open(path), "rb") as f:
        return b"\0" not in f.read(8192)


def _read(path: Path) -> bytes:
    with os.fdopen(_open(path), "rb") as f:
        return f.read()


def _same_as(path: Path, original: Path, size: int) -> bool:
    try:
        return original.is_file() and original.stat().st_size == size and original.read_bytes() == _read(path)
    except OSError:
        return False


class _TooMany(Exception):
    pass


def _walk(home: Path, max_files: int) -> Iterator[tuple[Path, os.stat_result]]:
    """(path, lstat) of every file-like entry of the agent's own under HOME: caches, the
    harness's copies (its payload, its files) aside; link directories not entered.
    Raises _TooMany at the first entry over max_files (directories count too)."""
    count = 0
    stack = [home]
    while stack:
        here = stack.pop()
        top = here == home
        with os.scandir(here) as listing:
            for e in listing:  # counted as listed: a directory of 400,000 is not read whole first
                count += 1
                if count > max_files:
                    raise _TooMany
                st = e.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    if e.name not in SKIP_DIRS and not (top and e.name == "agent"):  # agent/: its payload
                        stack.append(Path(e.path))
                elif not (top and e.name in HARNESS_FILES):
                    yield Path(e.path), st


@dataclass
class _Listing:
    """What agent_files.json lists, within its byte budgets."""

    keep: list[tuple[Path, int]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    skipped_bytes: int = 0
    #: reason -> how many left-out files are only counted (past the budget)
    uncounted: Counter = field(default_factory=Counter)

    def skip(self, entry: dict[str, Any]) -> None:
        cost = _json_cost(entry)
        if self.skipped_bytes + cost > SKIPPED_LIST_BYTES:
            self.uncounted[entry["why"]] += 1
            return
        self.skipped.append(entry)
        self.skipped_bytes += cost


def _json_cost(entry: dict[str, Any]) -> int:
    """An entry's bytes in the record (indented, non-ASCII escaped), with room to spare."""
    return len(json.dumps(entry)) + 16 * len(entry) + 16


def candidates(home: Path, task_dir: Path, max_files: int) -> tuple[_Listing, str | None]:
    """The files to keep (with sizes) and those left out (with why): the agent's HOME
    without caches, links, weights, binaries, the harness's own files and unchanged task
    files; or nothing, and the problem, when HOME holds more than max_files entries of
    the agent's (an agent outcome: none of its files is opened)."""
    listing = _Listing()
    try:  # counted first, opening nothing: 400,000 entries are refused in a second
        for _ in _walk(home, max_files):
            pass
    except _TooMany:
        return listing, f"the agent left more than {max_files} files and directories in its job dir (caches aside)"
    for p, st in _walk(home, max_files):
        rel = p.relative_to(home)
        if rel.parts[0] == "task" and _same_as(p, task_dir / Path(*rel.parts[1:]), st.st_size):
            continue
        if not stat.S_ISREG(st.st_mode):
            listing.skip({"path": str(rel), "why": "a link or not a regular file"})
        elif p.suffix.lower() in WEIGHT_SUFFIXES:
            listing.skip({"path": str(rel), "bytes": st.st_size, "why": "weights"})
        elif st.st_size > MAX_FILE_BYTES:
            listing.skip({"path": str(rel), "bytes": st.st_size, "why": f"larger than {MAX_FILE_BYTES} bytes"})
        elif not _is_text(p):
            listing.skip({"path": str(rel), "bytes": st.st_size, "why": "binary"})
        else:
            listing.keep.append((p, st.st_size))
    return listing, None


def save_agent_files(
    home: Path, task_dir: Path, cell_dir: Path, redactor: Redactor, max_bytes: int, max_files: int
) -> dict:
    """Copy the agent's files into <cell>/agent_files/ (sanitized), smallest first up to
    max_bytes; write agent_files.json. Returns that record; its ``problem`` says when the
    job dir held more than max_files entries of the agent's (an agent outcome)."""
    listing, problem = candidates(home, task_dir, max_files)
    out = cell_dir / AGENT_FILES
    cell_dir.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{AGENT_FILES}.partial-", dir=cell_dir))
    try:
        saved, total = _copy(listing, home, partial, redactor, max_bytes)
        sync_filesystem(partial)  # once, for every file written
        if out.exists() or out.is_symlink():
            shutil.rmtree(out) if out.is_dir() and not out.is_symlink() else out.unlink()
        os.rename(partial, out)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    record = {
        "dir": AGENT_FILES,
        "saved": saved,
        "skipped": sorted(listing.skipped, key=lambda s: s["path"]),
        # left-out files past the record's budget: only counted, by reason
        "skipped_uncounted": dict(listing.uncounted),
        "bytes": total,
        "max_bytes": max_bytes,
        "max_files": max_files,
        "problem": problem,
        "redactions": dict(redactor.hits),
    }
    atomic_write_json(cell_dir / AGENT_FILES_RECORD, record)
    return record


def _copy(listing: _Listing, home: Path, out: Path, redactor: Redactor, max_bytes: int) -> tuple[list[dict], int]:
    """Write the kept files (sanitized) under out, smallest first, while they fit in
    max_bytes and the record's budget; plain writes (the caller syncs once)."""
    saved: list[dict] = []
    total = listed = 0
    for p, size in sorted(listing.keep, key=lambda x: (x[1], str(x[0]))):
        rel = p.relative_to(home)
        if total + size > max_bytes:
            listing.skip({"path": str(rel), "bytes": size, "why": f"over the cap of {max_bytes} bytes in all"})
            continue
        data = redactor(_read(p))
        entry = {"path": str(rel), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        if listed + _json_cost(entry) > SAVED_LIST_BYTES:
            listing.skip({"path": str(rel), "bytes": size, "why": f"{AGENT_FILES_RECORD} is full"})
            continue
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with os.fdopen(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(data)
        total += size
        listed += _json_cost(entry)
        saved.append(entry)
    return saved, total
