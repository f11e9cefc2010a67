"""An index of what a command found of each cell of a final outcome, keyed by the
identity of the files it read it from, so that a second run over an unchanged campaign
looks the files up instead of reading and classifying them. Status
(``results.status_index``) and collect's cell table (``results.collect``) each keep one,
described by an :class:`IndexSpec`.

One JSON file in the results dir, written atomically and never trusted over the files:
an entry serves only while every file its outcome is read from (the spec's ``kept``) has
the same inode, size, mtime and ctime as when it was read, and the whole index serves
only for the harness code and the settings it was written with (its ``key``: the spec's
``deciding`` modules' source and the caller's settings). Only cells of a final outcome
are kept (scored; for status agent_failed too): their fields depend on those files
alone, where a running or pending one's depend on processes and time.

The identity is taken before the files are read, so a record rewritten during the read
leaves an entry that no longer matches. It is the cell dir's (inode, size, mtime, ctime)
and that of each source its outcome is read from that was present when the entry was
made; a source that was absent is not looked up again, since creating, removing or
renaming a file in the cell dir moves the dir's mtime and ctime (a warm run makes one
``lstat`` per cell and per present source, no failing lookups). The limit: a file
rewritten in place with the same inode and size, or a source created in the dir, within
the filesystem's timestamp granularity of the entry's making (mtimes and ctimes
unchanged) is not seen as changed; the harness writes every record through a rename (a
new inode), and an edit by hand changes the ctime, which no process can set back.

An entry is trusted as the records it stands for are: the index is written by the
harness into the results dir, which no sandboxed agent or scorer can write, and whoever
can write it can write the records too. It is never read from a link, and an entry whose
fields are not exactly the spec's, each of its type, or whose sources are not its
outcome's, is a miss.
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

#: a digest of a cell dir's and its sources' identity (inode, size, mtime, ctime)
Sig = str
#: each source's part in an entry's sig, in the spec's order: "1" present (looked up),
#: "0" absent (its creation moves the dir's identity), "-" not one its outcome is read from
Present = str
#: what ``CellIndex.sign`` took: the dir's identity and each source's (None: absent)
Signed = tuple[str, tuple[str | None, ...]]


#: a field that may hold any JSON scalar
SCALAR: tuple[type, ...] = (type(None), str, bool, int, float)


@dataclasses.dataclass(frozen=True)
class IndexSpec:
    """One index: its file in the results dir, the files of a cell its fields may be read
    from, the modules whose code decides them, and its entries' fields with the types
    each may hold (an entry with other fields or types, an index edited or damaged, is
    looked up as a miss). Only cells of a kept outcome are kept (``outcome`` is one of
    the fields), each keyed by the sources that outcome is read from (``kept``; by
    default scored cells, by all of them)."""

    file_name: str
    sources: tuple[str, ...]
    deciding: tuple[str, ...]
    fields: Mapping[str, tuple[type, ...]]
    version: int = 1
    #: the outcomes whose fields the sources alone decide (no process, no clock), each
    #: with the sources it is read from (a subset of ``sources``)
    kept: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.kept:
            object.__setattr__(self, "kept", {"scored": self.sources})
        unknown = {name for names in self.kept.values() for name in names} - set(self.sources)
        if unknown:
            raise ValueError(f"{self.file_name}: kept outcomes read from sources it does not have: {sorted(unknown)}")

    def valid(self, fields: Any) -> bool:
        """An entry's fields are exactly this spec's, each of its types, of a kept outcome."""
        return (
            isinstance(fields, dict)
            and fields.keys() == self.fields.keys()
            and all(type(fields[name]) in kinds for name, kinds in self.fields.items())
            and fields["outcome"] in self.kept
        )

    def read_from(self, outcome: str) -> list[bool]:
        """Which of the sources an outcome's entry is keyed by, in order."""
        names = self.kept[outcome]
        return [name in names for name in self.sources]


def _identity(st: os.stat_result) -> str:
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _digest(seen: list[str]) -> Sig:
    return hashlib.blake2b("|".join(seen).encode(), digest_size=16).hexdigest()


def sources_sig(cell_dir: str, sources: Sequence[str]) -> Signed | None:
    """The identity of a cell dir and of each of its sources, each looked up (taken before
    a cell is read, for its entry), or None where one could not be."""
    try:
        own = _identity(os.lstat(cell_dir))
    except OSError:
        return None
    seen: list[str | None] = []
    for name in sources:
        try:
            seen.append(_identity(os.lstat(f"{cell_dir}/{name}")))
        except FileNotFoundError:
            seen.append(None)
        except OSError:
            return None
    return own, tuple(seen)


def _entry_sig(signed: Signed, read_from: Sequence[bool]) -> tuple[Sig, Present]:
    """An entry's sig and its Present: the dir and the sources its outcome is read from."""
    own, seen = signed
    parts, present = [own], ""
    for identity, used in zip(seen, read_from, strict=True):
        if not used:
            present += "-"
        elif identity is None:
            parts.append("-")
            present += "0"
        else:
            parts.append(identity)
            present += "1"
    return _digest(parts), present


def _sig_as_before(cell_dir: str, sources: Sequence[str], present: Present) -> Sig | None:
    """The same identity, looking up only the sources that were present and read from:
    one that is gone makes it None, one that came moved the dir's mtime."""
    try:
        parts = [_identity(os.lstat(cell_dir))]
        for name, was in zip(sources, present, strict=True):
            if was == "1":
                parts.append(_identity(os.lstat(f"{cell_dir}/{name}")))
            elif was == "0":
                parts.append("-")
    except OSError:
        return None
    return _digest(parts)


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
        self._shape: dict[str, str] = {}

    def lookup(self, rel: str, cell_dir: str) -> dict[str, Any] | None:
        """The fields kept for a cell whose dir and sources are as they were."""
        entry = self.entries.get(rel)
        if not isinstance(entry, list) or len(entry) != 3 or not self.spec.valid(entry[1]):
            return None
        sig, fields, present = entry
        # which sources are looked up follows from the outcome, never from the entry alone
        if not isinstance(present, str) or self._parts(fields["outcome"]) != present.replace("1", "0"):
            return None
        if not isinstance(sig, str) or _sig_as_before(cell_dir, self.spec.sources, present) != sig:
            return None
        self.fresh[rel] = entry
        return fields

    def _parts(self, outcome: str) -> str:
        """An outcome's Present with every source read from as "0"."""
        if outcome not in self._shape:
            self._shape[outcome] = "".join("0" if used else "-" for used in self.spec.read_from(outcome))
        return self._shape[outcome]

    def sign(self, cell_dir: str) -> Signed | None:
        """The cell's identity, taken before its files are read (see ``keep``)."""
        return sources_sig(cell_dir, self.spec.sources)

    def keep(self, rel: str, signed: Signed | None, fields: dict[str, Any]) -> None:
        """A kept outcome's fields, read after the cell's identity was ``signed``."""
        outcome = fields.get("outcome")
        if signed is not None and outcome in self.spec.kept:
            sig, present = _entry_sig(signed, self.spec.read_from(outcome))
            self.fresh[rel] = [sig, fields, present]

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
