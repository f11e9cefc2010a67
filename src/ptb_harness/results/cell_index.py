"""An index of what a command found of each scored cell, keyed by the identity of the
files it read it from, so that a second run over an unchanged campaign looks the files
up instead of reading and classifying them. Status (``results.status_index``) and
collect's cell table (``results.collect``) each keep one, described by an
:class:`IndexSpec`.

One JSON file in the results dir, written atomically and never trusted over the files:
an entry serves only while every file it was read from (the spec's ``sources``) has the
same inode, size, mtime and ctime as when it was read, and the whole index serves only
for the harness code and the settings it was written with (its ``key``: the spec's
``deciding`` modules' source and the caller's settings). Only scored cells are kept: a
scored cell's fields depend on those files alone, where a running or pending one's
depend on processes and time.

The identity is taken before the files are read, so a record rewritten during the read
leaves an entry that no longer matches. It is the cell dir's (inode, size, mtime, ctime)
and that of each source present when the entry was made; a source that was absent is not
looked up again, since creating, removing or renaming a file in the cell dir moves the
dir's mtime and ctime (a warm run makes one ``lstat`` per cell and per present source,
no failing lookups). The limit: a file rewritten in place with the same inode and size,
or a source created in the dir, within the filesystem's timestamp granularity of the
entry's making (mtimes and ctimes unchanged) is not seen as changed; the harness writes
every record through a rename (a new inode), and an edit by hand changes the ctime,
which no process can set back.

An entry is trusted as the records it stands for are: the index is written by the
harness into the results dir, which no sandboxed agent or scorer can write, and whoever
can write it can write the records too. It is never read from a link, and an entry whose
fields are not exactly the spec's, each of its type, is a miss.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ptb_harness.core.records import atomic_write_text, read_record_bytes

#: an index may be this big (20,000 cells take about 6 MB for status): a bigger one is not read
MAX_INDEX_BYTES = 256 * 1024 * 1024
#: the modules every index's entries depend on (this one's rules)
_OWN = ("ptb_harness.results.cell_index", "ptb_harness.core.records")

#: a digest of a cell dir's and its present sources' identity (inode, size, mtime, ctime)
Sig = str
#: which sources a cell dir held when its sig was taken: "1" or "0" for each, in order
Present = str


#: a field that may hold any JSON scalar
SCALAR: tuple[type, ...] = (type(None), str, bool, int, float)


@dataclasses.dataclass(frozen=True)
class IndexSpec:
    """One index: its file in the results dir, the files of a cell its fields are read
    from, the modules whose code decides them, and its entries' fields with the types
    each may hold (an entry with other fields or types, an index edited or damaged, is
    looked up as a miss). Only scored cells are kept: ``outcome`` is one of the fields."""

    file_name: str
    sources: tuple[str, ...]
    deciding: tuple[str, ...]
    fields: Mapping[str, tuple[type, ...]]
    version: int = 1

    def valid(self, fields: Any) -> bool:
        """An entry's fields are exactly this spec's, each of its types, of a scored cell."""
        return (
            isinstance(fields, dict)
            and fields.keys() == self.fields.keys()
            and all(type(fields[name]) in kinds for name, kinds in self.fields.items())
            and fields["outcome"] == "scored"
        )


def _identity(st: os.stat_result) -> str:
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _digest(seen: list[str]) -> Sig:
    return hashlib.blake2b("|".join(seen).encode(), digest_size=16).hexdigest()


def sources_sig(cell_dir: str, sources: Sequence[str]) -> tuple[Sig, Present] | None:
    """The identity of a cell dir and its sources, each looked up (taken before a cell is
    read, for its entry), or None where one could not be."""
    try:
        seen = [_identity(os.lstat(cell_dir))]
    except OSError:
        return None
    present = ""
    for name in sources:
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


def _sig_as_before(cell_dir: str, sources: Sequence[str], present: Present) -> Sig | None:
    """The same identity, looking up only the sources that were present: one that is gone
    makes it None, one that came moved the dir's mtime."""
    try:
        seen = [_identity(os.lstat(cell_dir))]
        for name, was in zip(sources, present, strict=True):
            seen.append(_identity(os.lstat(f"{cell_dir}/{name}")) if was == "1" else "-")
    except OSError:
        return None
    return _digest(seen)


def index_key(spec: IndexSpec, settings: Mapping[str, Any]) -> str:
    """What an index is valid for: its spec's deciding code (and this module's) and these settings."""
    digest = hashlib.sha256(json.dumps([spec.version, spec.file_name, settings], sort_keys=True).encode())
    for name in (*_OWN, *spec.deciding):
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


class CellIndex:
    """The entries read from a spec's index (those of its key only), and the entries of
    this run, written back by ``save``."""

    def __init__(self, spec: IndexSpec, results_dir: str | Path, key: str):
        self.spec = spec
        self.path = Path(results_dir) / spec.file_name
        self.key = key
        data = _read_index(self.path)
        cells = data.get("cells") if data.get("key") == key else None
        self.entries: dict[str, Any] = cells if isinstance(cells, dict) else {}
        self.fresh: dict[str, list[Any]] = {}

    def lookup(self, rel: str, cell_dir: str) -> dict[str, Any] | None:
        """The fields kept for a cell whose dir and sources are as they were."""
        entry = self.entries.get(rel)
        if not isinstance(entry, list) or len(entry) != 3 or not self.spec.valid(entry[1]):
            return None
        sig, fields, present = entry
        if not isinstance(present, str) or len(present) != len(self.spec.sources) or set(present) - {"0", "1"}:
            return None
        if not isinstance(sig, str) or _sig_as_before(cell_dir, self.spec.sources, present) != sig:
            return None
        self.fresh[rel] = entry
        return fields

    def sign(self, cell_dir: str) -> tuple[Sig, Present] | None:
        """The cell's identity, taken before its files are read (see ``keep``)."""
        return sources_sig(cell_dir, self.spec.sources)

    def keep(self, rel: str, signed: tuple[Sig, Present] | None, fields: dict[str, Any]) -> None:
        """A scored cell's fields, read after its identity was ``signed``."""
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


def writable_index(spec: IndexSpec, results_dir: str, settings: Mapping[str, Any]) -> CellIndex | None:
    """The spec's index of a results dir, or None where the dir cannot be written (looking
    the sources up would then be for nothing)."""
    return CellIndex(spec, results_dir, index_key(spec, settings)) if os.access(results_dir, os.W_OK) else None
