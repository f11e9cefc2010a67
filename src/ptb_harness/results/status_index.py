"""The status index: what status found of each scored cell, keyed by the identity of the
files it read it from, so that a second status of an unchanged campaign looks the files
up instead of reading and classifying them.

One JSON file in the results dir (``STATUS_INDEX``), written atomically by status and
never trusted over the files: an entry serves only while every file it was read from
(``SOURCES``) has the same inode, size, mtime and ctime as when it was read, and the
whole index serves only for the harness code and the settings it was written with (its
``key``). Only scored cells are kept: a scored cell's status depends on those files
alone, where a running or pending one's depends on processes and time.

The identity is taken before the files are read, so a record rewritten during the read
leaves an entry that no longer matches. It is the cell dir's (inode, size, mtime, ctime)
and that of each source present when the entry was made; a source that was absent is not
looked up again, since creating, removing or renaming a file in the cell dir moves the
dir's mtime and ctime (a warm status makes one ``lstat`` per cell and per present source,
no failing lookups). The limit: a file rewritten in place with the same inode and size,
or a source created in the dir, within the filesystem's timestamp granularity of the
entry's making (mtimes and ctimes unchanged) is not seen as changed; the harness writes
every record through a rename (a new inode), and an edit by hand changes the ctime,
which no process can set back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ptb_harness.core.cell_files import EVALUATE, JUDGEMENT, JUDGEMENT_OVERRIDE, METRICS, SOLVE
from ptb_harness.core.records import atomic_write_text, read_record_bytes

#: the index's file in the results dir
STATUS_INDEX = ".status-index.json"
#: the files a scored cell's status is read from: their identity keys its entry
SOURCES = (METRICS, EVALUATE, SOLVE, JUDGEMENT, JUDGEMENT_OVERRIDE)
#: the modules whose code decides a cell's status: a change to any makes a new index
_DECIDING = (
    "ptb_harness.results.status",
    "ptb_harness.results.outcome",
    "ptb_harness.results.flags",
    "ptb_harness.results.status_index",
    "ptb_harness.core.cell_files",
    "ptb_harness.core.records",
    "ptb_harness.judging.verdict",
)
_VERSION = 2
#: the index may be this big (20,000 cells take about 6 MB): a bigger one is not read
MAX_INDEX_BYTES = 256 * 1024 * 1024
#: the status fields an entry holds, and each one's type: an entry with any other serves not
FIELDS: dict[str, type] = {
    "outcome": str,
    "evidence": str,
    "flag": str,
    "flag_justification": str,
    "ptb_lookup": str,
    "override": str,
    "metrics_present": bool,
}

#: a digest of a cell dir's and its present sources' identity (inode, size, mtime, ctime)
Sig = str
#: which SOURCES a cell dir held when its sig was taken: "1" or "0" for each, in order
Present = str


def _identity(st: os.stat_result) -> str:
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _digest(seen: list[str]) -> Sig:
    return hashlib.blake2b("|".join(seen).encode(), digest_size=16).hexdigest()


def sources_sig(cell_dir: str) -> tuple[Sig, Present] | None:
    """The identity of a cell dir and its SOURCES, each looked up (taken before a cell is
    read, for its entry), or None where one could not be."""
    try:
        seen = [_identity(os.lstat(cell_dir))]
    except OSError:
        return None
    present = ""
    for name in SOURCES:
        try:
            st = os.lstat(f"{cell_dir}/{name}")
        except FileNotFoundError:
            seen.append("-")
            present += "0"
            continue
        except OSError:
            return None
        seen.append(_identity(st))
        present += "1"
    return _digest(seen), present


def _sig_as_before(cell_dir: str, present: Present) -> Sig | None:
    """The same identity, looking up only the sources that were present: one that is gone
    makes it None, one that came moved the dir's mtime."""
    try:
        seen = [_identity(os.lstat(cell_dir))]
        for name, was in zip(SOURCES, present, strict=True):
            seen.append(_identity(os.lstat(f"{cell_dir}/{name}")) if was == "1" else "-")
    except OSError:
        return None
    return _digest(seen)


def index_key(settings: Mapping[str, Any]) -> str:
    """What an index is valid for: this harness's deciding code and these settings."""
    digest = hashlib.sha256(json.dumps([_VERSION, settings], sort_keys=True).encode())
    for name in _DECIDING:
        source = getattr(sys.modules.get(name), "__file__", None)
        if source is None:
            digest.update(f"{name}: not loaded".encode())
            continue
        with open(source, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def _read_index(path: Path) -> dict[str, Any]:
    """The index file's object ({} if missing, a link, too big or broken): read as the
    records are (no link followed, bounded) but without their depth walk (it is megabytes
    at 20,000 cells; a too-deep one raises RecursionError, caught)."""
    raw, _ = read_record_bytes(path, MAX_INDEX_BYTES)
    if raw is None:
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _valid_fields(fields: Any) -> bool:
    """An entry's fields are exactly FIELDS, each of its type, and of a scored cell (the
    only ones kept): anything else (an index edited or damaged) is looked up as a miss."""
    return (
        isinstance(fields, dict)
        and fields.keys() == FIELDS.keys()
        and all(type(fields[name]) is kind for name, kind in FIELDS.items())
        and fields["outcome"] == "scored"
    )


class StatusIndex:
    """The entries read from the index (those of its key only), and the entries of this
    run, written back by ``save``."""

    def __init__(self, results_dir: str | Path, key: str):
        self.path = Path(results_dir) / STATUS_INDEX
        self.key = key
        data = _read_index(self.path)
        cells = data.get("cells") if data.get("key") == key else None
        self.entries: dict[str, Any] = cells if isinstance(cells, dict) else {}
        self.fresh: dict[str, list[Any]] = {}

    def lookup(self, rel: str, cell_dir: str) -> dict[str, Any] | None:
        """The status fields kept for a cell whose dir and sources are as they were."""
        entry = self.entries.get(rel)
        if not isinstance(entry, list) or len(entry) != 3 or not _valid_fields(entry[1]):
            return None
        sig, fields, present = entry
        if not isinstance(present, str) or len(present) != len(SOURCES) or set(present) - {"0", "1"}:
            return None
        if not isinstance(sig, str) or _sig_as_before(cell_dir, present) != sig:
            return None
        self.fresh[rel] = entry
        return fields

    def keep(self, rel: str, signed: tuple[Sig, Present] | None, fields: dict[str, Any]) -> None:
        """A scored cell's status fields, read after its sources_sig was ``signed``."""
        if signed is not None:
            self.fresh[rel] = [signed[0], fields, signed[1]]

    def save(self, rels: Sequence[str]) -> None:
        """Write this run's entries (in the cells' order), where they differ from what was
        read; a results dir that cannot be written keeps no index."""
        cells = {rel: self.fresh[rel] for rel in rels if rel in self.fresh}
        if cells == self.entries:
            return
        with contextlib.suppress(OSError):
            atomic_write_text(self.path, json.dumps({"key": self.key, "cells": cells}, separators=(",", ":")))
