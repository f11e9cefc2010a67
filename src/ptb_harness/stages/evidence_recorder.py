"""The evidence recorder: every file the agent writes during its solve, read by the
harness as it is written, wherever it lies in the job dir, whatever it is named, and
whether or not it is still there at the end. A process of its own beside the agent
(``python -m ptb_harness.stages.evidence_recorder CONFIG``), started by the solve stage
before the agent and stopped (SIGTERM) after it; it writes ``evidence.json`` (what the
judge reads) and ``evidence_index.jsonl.gz`` (one line per file version read) into the
cell dir, where the agent cannot write.

How it sees the files:

- **Baseline.** Before the agent starts it walks the job dir's roots (HOME, /tmp, the HF
  cache's upper layer) and notes each file's identity (inode, size, mtime, ctime): what
  the harness put there. A file whose identity is unchanged is the harness's (the task's
  copy, the agent's payload, solve.sh); any other is the agent's, the payload dir and
  hidden and cache dirs included. A change of content changes the ctime, which no
  process can set back.
- **Events.** Every directory is watched with inotify; a file closed after writing, or
  moved in, is read at once (``Inotify``). A path written again within its debounce
  window (1 s, doubling to 60 s for a path written over and over) is held open and read
  when the window ends, so deleting it in between loses nothing; a text file that only
  grew is read from where the last read ended, once its old bytes hash as they did.
- **Periodic scans** (``site.evidence_scan_seconds``) read whatever changed unnoticed (a
  full inotify queue, directories past the watch limit, a file written through mmap).
- **The final scan** after the agent ended reads what is left, files the agent made
  unreadable (mode 000) included, and tells which files read earlier are gone.

What it reads of a file: every text it holds (``ptb_scorer.decode``: any encoding and
container, weights told by content), scanned against the task's test set
(``ptb_scorer.ngrams``), and where it names PostTrainBench or a hosted LLM API. Nothing
of the files is kept but those findings (a matched test gram, a redacted line), so its
disk cost is the index. The record is incomplete (``complete: false``, judge_failed)
when a file could not be read in full (past ``site.evidence_file_max_mb``, the total
``site.evidence_max_gb``, an encrypted or corrupt container, a permission it cannot
lift), the job dir held more than ``site.agent_files_max_files`` entries, or the test
set could not be loaded. A file written and deleted faster than the recorder can open it
(milliseconds) is counted as ``lost``, with its path: reported, not a failure (package
installs do it by the thousand).

Its memory is capped (``site.evidence_memory_mb``: RLIMIT_DATA, set by ``main`` before it
reads anything of the agent's; RECORDER_ENV makes the cap count what it uses): a
decompression bomb fails its allocation, and the file is recorded as not read in full,
naming the cap, never a traceback nor the node's memory.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import io
import json
import os
import re
import resource
import signal
import stat
import sys
import time
from collections import OrderedDict
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptb_harness.core.cell_files import EVIDENCE, EVIDENCE_INDEX
from ptb_harness.core.records import atomic_write_json
from ptb_harness.judging.lookups import HOSTED_HOSTS, PTB_PLACES, SDK_CALLS
from ptb_harness.judging.sources import TestSetPlaces, is_package_path
from ptb_harness.runtime.inotify import (
    IN_CREATE,
    IN_DELETE,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_Q_OVERFLOW,
    Event,
    Inotify,
    NoWatch,
    WatchError,
)
from ptb_harness.traces.redact import Redactor, secrets_from_env
from ptb_scorer.contamination import FileScan, samples_sha256
from ptb_scorer.decode import Budget, decode
from ptb_scorer.ngrams import NgramIndex, Piece, Scanner, ScanResult

#: files read into memory whole (hashed once, their scan shared by identical copies)
HASH_MAX = 64 << 20
#: scans remembered by content (a job dir of 400,000 files does not keep 400,000)
SCANS_KEPT = 4096
#: a text file that grew is read from its old end, minus this overlap (grams across the seam)
APPEND_OVERLAP = 64 << 10
DEBOUNCE_FIRST, DEBOUNCE_MAX = 1.0, 60.0
#: paths held open while their debounce runs
MAX_HELD = 256
#: the longest the loop blocks at once (SIGTERM's flag is read between waits)
WAIT_MAX_S = 1.0
#: the recorder's environment, so that its memory cap counts what it uses: Arrow's allocator
#: malloc (mimalloc, its default, reserves 1 GiB segments: 1.2 GiB of data mapped for a
#: 10 MB Parquet read), and one thread for BLAS, OpenMP and Arrow (each thread's stack and
#: OpenBLAS's buffers are data too: some 20 MiB a core at import, unused)
RECORDER_ENV = {
    "ARROW_DEFAULT_MEMORY_POOL": "system",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "ARROW_IO_THREADS": "1",
}
#: what a file may name: PostTrainBench's places, a hosted LLM API's host, an SDK's call
_MENTIONS = re.compile(
    f"(?P<ptb>{PTB_PLACES.pattern})|(?P<hosted_api>{HOSTED_HOSTS.pattern})|(?P<sdk_call>{SDK_CALLS.pattern})", re.I
)
#: a text holds a mention only if it holds one of these (lowercased)
_MENTION_ANCHORS = (
    *("posttrainbench", "aisa-group", "api", "openrouter", "azure", "bedrock", "dashscope", "router.huggingface"),
    *("completions.create", ".create(", "generate_content(", "litellm"),
)
#: bounds of evidence.json's lists (its counts are whole)
MAX_FINDINGS, MAX_MENTIONS, MAX_LISTED = 300, 200, 50
_APPENDABLE = frozenset({"text", "jsonl", "csv"})


@dataclass(frozen=True)
class RecorderConfig:
    """What the solve stage tells the recorder (a JSON file; no secret in it)."""

    job_root: str
    #: the job dir's subdirs the agent can write (HOME, /tmp, the HF cache's upper layer)
    roots: list[str]
    #: the cell dir: where evidence.json and the index go
    out_dir: str
    test_set_spec: dict[str, Any] | None = None
    ngram_n: int = 13
    sample_overlap: float = 0.5
    scan_seconds: float = 30.0
    file_max_bytes: int = 8 << 30
    total_max_bytes: int = 200 << 30
    max_files: int = 200_000
    #: variables whose values are redacted from what the record quotes (names only)
    secret_names: list[str] = field(default_factory=list)
    #: its memory cap (RLIMIT_DATA, set by main; None: none, as record_once runs)
    memory_max_bytes: int | None = None

    @property
    def out_of_memory(self) -> str:
        """What running out of memory reading a file is called in the record."""
        if self.memory_max_bytes is None:
            return "out of memory"
        return f"over the recorder's memory cap ({self.memory_max_bytes >> 20} MiB, site.evidence_memory_mb)"

    @classmethod
    def read(cls, path: Path) -> RecorderConfig:
        return cls(**json.loads(path.read_text()))


#: a file's identity, hashed to one int (a job dir of 400,000 files holds 400,000 of them)
Sig = int


def sig_of(st: os.stat_result) -> Sig:
    """A file's identity: a new content changes it (the ctime cannot be set back)."""
    return hash((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))


@dataclass(slots=True)
class _Version:
    """The last read of a path."""

    sig: Sig
    ino: int
    #: what the file was read as (its outermost kind)
    kind: str
    size: int
    #: a text file's sha256 of its bytes as read (the next read checks its old part is unchanged)
    prefix: bytes = b""


@dataclass
class _Held:
    """A path written again within its debounce window: held open, read when it ends."""

    fd: int
    due: float


@dataclass
class Tally:
    """What the recorder found, across every version of every file."""

    hits: dict[int, set[int]] = field(default_factory=dict)
    files_of: dict[int, list[str]] = field(default_factory=dict)
    source_hits: dict[int, set[int]] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    files_with_test_samples: int = 0
    mentions: list[dict[str, Any]] = field(default_factory=list)
    mentions_count: int = 0
    incomplete: list[dict[str, Any]] = field(default_factory=list)
    incomplete_count: int = 0
    lost: list[str] = field(default_factory=list)
    lost_count: int = 0

    def add_hits(self, rel: str, result: ScanResult, counted: bool) -> None:
        target = self.hits if counted else self.source_hits
        for sample, grams in result.hits.items():
            target.setdefault(sample, set()).update(grams)
            if counted:
                where = self.files_of.setdefault(sample, [])
                if rel not in where and len(where) < 5:
                    where.append(rel)

    def fail(self, rel: str, why: str) -> None:
        self.incomplete_count += 1
        if len(self.incomplete) < MAX_LISTED:
            self.incomplete.append({"path": rel, "why": why})


class _Borrowed(io.RawIOBase):
    """A file from ``base`` on, as a stream of its own (position 0 is base), read through a
    buffer that does not close it."""

    def __init__(self, f: Any, base: int = 0):
        self.f, self.base = f, base
        f.seek(base)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        return self.f.readinto(b)

    def seek(self, pos: int, whence: int = 0) -> int:
        return self.f.seek(pos + self.base if whence == io.SEEK_SET else pos, whence) - self.base

    def tell(self) -> int:
        return self.f.tell() - self.base


def _prefix_digest(f: Any, size: int) -> bytes:
    """sha256 of a file's first size bytes (b"" when it holds fewer now)."""
    f.seek(0)
    h, left = hashlib.sha256(), size
    while left > 0:
        data = f.read(min(left, 1 << 20))
        if not data:
            return b""
        h.update(data)
        left -= len(data)
    return h.digest()


def peak_rss_kb() -> int:
    """This process's peak resident memory (VmHWM: its own since exec; ru_maxrss can carry
    its parent's across fork and exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class Recorder:
    """The recorder's state and its reads; ``run`` is its life."""

    def __init__(self, config: RecorderConfig, index: NgramIndex | None, test_error: str | None, redact: Redactor):
        self.config = config
        self.root = Path(config.job_root)
        self._prefix = str(self.root) + os.sep
        self.index = index
        self.test_error = test_error
        #: the identity of the samples scanned against (set by main)
        self.test_sha256: str | None = None
        self.sources = TestSetPlaces.of(config.test_set_spec)
        self.redact = redact
        self.baseline: dict[str, Sig] = {}
        self.seen: dict[str, _Version] = {}
        self.held: dict[str, _Held] = {}
        self.backoff: dict[str, tuple[float, float]] = {}
        #: the last scans by content (copies of one file, a rename's re-read), least recent first
        self.scans: OrderedDict[str, FileScan] = OrderedDict()
        self.tally = Tally()
        self.counts: dict[str, int] = dict.fromkeys(
            ("versions", "bytes_read", "weights_bytes_skipped", "scans", "overflows", "unwatched_dirs", "entries"), 0
        )
        self.too_many = False
        #: paths that could not be opened during the run (the final scan lifts their mode)
        self.unreadable: set[str] = set()
        #: the recorder's start on the monotonic clock: every duration and deadline it keeps
        #: is on that one clock (a wall-clock step cannot stretch or skip a window)
        self.started = time.monotonic()
        try:
            self.inotify: Inotify | NoWatch = Inotify()
            self.watching = "inotify"
        except OSError as e:  # the walks still see every file that lives past one
            self.inotify = NoWatch()
            self.watching = f"walks only (inotify: {e})"
        # open for the recorder's life, closed by finish()
        self.index_file = gzip.open(  # noqa: SIM115
            Path(config.out_dir) / EVIDENCE_INDEX, "wt", encoding="utf-8", compresslevel=3
        )

    # -- walking -------------------------------------------------------------------------

    def rel(self, path: str) -> str:
        """A path below the job dir, relative to it (every path the recorder meets is)."""
        prefix = self._prefix
        return path[len(prefix) :] if path.startswith(prefix) else os.path.relpath(path, self.root)

    def walk(self, final: bool = False) -> Iterator[tuple[str, os.stat_result]]:
        """(path, lstat) of every entry under the roots; directories watched as listed.
        Stops (incomplete) past max_files entries."""
        stack = [str(self.root / r) for r in self.config.roots if (self.root / r).is_dir()]
        for d in stack:
            self._watch(d)
        listed = yield from self._descend(stack, final, self.config.max_files)
        if listed is None:
            self.too_many = True
        else:
            self.counts["entries"] = listed

    def _descend(
        self, stack: list[str], final: bool, most: int | None = None
    ) -> Generator[tuple[str, os.stat_result], None, int | None]:
        """(path, lstat) of every entry below the directories on ``stack``, depth first;
        directories watched as listed. Returns how many entries were listed, or None at
        the first past ``most`` (not stat'ed, and the walk ends there)."""
        count = 0
        while stack:
            for entry in self._listing(stack.pop(), final):
                count += 1
                if most is not None and count > most:
                    return None
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    self._watch(entry.path)
                    stack.append(entry.path)
                yield entry.path, st
        return count

    def _listing(self, directory: str, final: bool) -> list[os.DirEntry]:
        try:
            with os.scandir(directory) as it:
                return list(it)
        except PermissionError:
            if final and self._lift(directory, stat.S_IRWXU):
                return self._listing(directory, False)
            self.tally.fail(self.rel(directory), "a directory the recorder could not list")
        except OSError:
            pass  # gone while walked
        return []

    def _lift(self, path: str, bits: int) -> bool:
        """Give the owner back its read rights on a path the agent closed (the final scan:
        the agent is gone)."""
        try:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                return False
            os.chmod(path, stat.S_IMODE(st.st_mode) | bits)
            return True
        except OSError:
            return False

    def _watch(self, directory: str) -> None:
        try:
            self.inotify.watch(directory)
        except WatchError as e:
            if e.errno != errno.ENOENT:
                self.counts["unwatched_dirs"] += 1

    def take_baseline(self) -> None:
        for path, st in self.walk():
            if stat.S_ISREG(st.st_mode):
                self.baseline[self.rel(path)] = sig_of(st)

    # -- reading a file ----------------------------------------------------------------------

    def capture(self, path: str, fd: int | None = None, final: bool = False) -> None:
        """Read one file now (fd: already open) unless its identity is known."""
        rel = self.rel(path)
        if fd is None:
            fd = self._open(path, rel, final)
            if fd is None:
                return
        with os.fdopen(fd, "rb", buffering=0) as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return
            sig = sig_of(st)
            self.unreadable.discard(rel)
            last = self.seen.get(rel)
            if self.baseline.get(rel) == sig or (last is not None and last.sig == sig):
                return
            try:
                self._read(rel, f, st, last)
            except MemoryError:  # outside the decoders (a whole read, a hash): the cap, this file only
                self.tally.fail(rel, self.config.out_of_memory)
            except Exception as e:  # a reader's bug or an input no reader foresaw: this file, not the record
                self.tally.fail(rel, f"the recorder failed reading it ({type(e).__name__}: {str(e)[:200]})")

    def _open(self, path: str, rel: str, final: bool) -> int | None:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            return os.open(path, flags)
        except FileNotFoundError:
            self.tally.lost_count += 1
            if len(self.tally.lost) < MAX_LISTED:
                self.tally.lost.append(rel)
        except PermissionError:
            if not final:
                self.unreadable.add(rel)  # left to the final scan, which lifts the mode
            elif self._lift(path, stat.S_IRUSR):
                return self._open(path, rel, False)
            else:
                self.tally.fail(rel, "a file the recorder could not open (its mode)")
        except OSError:
            pass  # a link (O_NOFOLLOW): no content of its own
        return None

    def _read(self, rel: str, f: Any, st: os.stat_result, last: _Version | None) -> None:
        left = self.config.total_max_bytes - self.counts["bytes_read"]
        limit = min(self.config.file_max_bytes, max(left, 0))
        offset = self._append_offset(f, st, last)
        digest, scan = self._scan(rel, f, st.st_size, limit, offset)
        self.counts["versions"] += 1
        self.counts["bytes_read"] += scan.budget.used
        self.counts["weights_bytes_skipped"] += scan.budget.weights_bytes
        outer = scan.budget.kinds[0] if scan.budget.kinds else "empty"
        kind = sys.intern(outer if offset == 0 or last is None else last.kind)
        prefix = _prefix_digest(f, st.st_size) if kind in _APPENDABLE else b""
        self.seen[rel] = _Version(sig_of(st), st.st_ino, kind, st.st_size, prefix)
        self._record(rel, st, digest, scan, offset)

    @staticmethod
    def _append_offset(f: Any, st: os.stat_result, last: _Version | None) -> int:
        """Where to read a text file that only grew from (its inode kept, its old bytes the
        same: hashed again, some 50x cheaper than reading them again); 0: whole."""
        if last is None or last.kind not in _APPENDABLE or last.ino != st.st_ino or st.st_size < last.size:
            return 0
        if last.size <= 2 * APPEND_OVERLAP or _prefix_digest(f, last.size) != last.prefix:
            return 0
        return last.size - APPEND_OVERLAP

    def _scan(self, rel: str, f: Any, size: int, limit: int, offset: int) -> tuple[str, FileScan]:
        if offset == 0 and size <= HASH_MAX:
            f.seek(0)
            data = f.read(size + 1)
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            scan = self.scans.pop(digest, None) or self._scan_stream(io.BytesIO(data), rel, limit)
            self.scans[digest] = scan
            if len(self.scans) > SCANS_KEPT:
                self.scans.popitem(last=False)
            return digest, scan
        f.seek(offset)
        head = hashlib.sha256(f.read(1 << 20)).hexdigest()
        f.seek(offset)
        stream = io.BufferedReader(_Borrowed(f, offset), 1 << 20)  # from offset; f stays open
        return f"head-sha256:{head}@{offset}", self._scan_stream(stream, rel, limit)

    def _scan_stream(self, stream: Any, rel: str, limit: int) -> FileScan:
        """Every text of the file against the test set (without one, still read: for the
        mentions, and whether it can be read at all)."""
        budget = Budget(limit, out_of_memory=self.config.out_of_memory)
        scanner = Scanner(self.index) if self.index else None
        for piece in self._tee(decode(stream, rel, budget), rel):
            if scanner is not None:
                scanner.add(piece)
        return FileScan(scanner.finish() if scanner else ScanResult(), budget)

    def _tee(self, pieces: Iterator[Piece], rel: str) -> Iterator[Piece]:
        look = not is_package_path(rel)
        for piece in pieces:
            if look:
                self._look(piece.text, rel)
            yield piece

    def _look(self, text: str, rel: str) -> None:
        lowered = text.lower()
        if not any(a in lowered for a in _MENTION_ANCHORS):  # most texts: a few substring tests
            return
        for m in _MENTIONS.finditer(text):
            what = m.lastgroup or ""
            self.tally.mentions_count += 1
            if len(self.tally.mentions) < MAX_MENTIONS:
                line_start = text.rfind("\n", 0, m.start()) + 1
                line = text[line_start : line_start + 300]
                excerpt = self.redact(line.encode("utf-8", "replace")).decode("utf-8", "replace")
                self.tally.mentions.append({"path": rel, "what": what, "match": m.group(0), "excerpt": excerpt})

    def _record(self, rel: str, st: os.stat_result, digest: str, scan: FileScan, offset: int) -> None:
        result, place = scan.result, self.sources.place_of(rel)
        counted = place is None or (TestSetPlaces.held_to_purity(place) and not result.pure)
        found = result.found(self.index, self._overlap) if self.index else []
        if result.hits:
            self.tally.add_hits(rel, result, counted)
            self._finding(rel, scan, found, place, counted)
        for why in scan.budget.cut:
            self.tally.fail(rel, why)
        line = {"path": rel, "t": round(time.monotonic() - self.started, 3), "bytes": st.st_size, "id": digest}
        line |= {"kind": scan.budget.kind, "samples": len(found), "grams": sum(map(len, result.hits.values()))}
        if offset:
            line["from"] = offset
        if place:
            line["place"] = place if not counted else f"{place} (not only test samples: counted)"
        if scan.budget.cut:
            line["cut"] = scan.budget.cut
        self.index_file.write(json.dumps(line, ensure_ascii=False) + "\n")

    @property
    def _overlap(self) -> float:
        return self.config.sample_overlap

    def _finding(self, rel: str, scan: FileScan, found: list[int], place: str | None, counted: bool) -> None:
        self.tally.files_with_test_samples += 1
        if len(self.tally.findings) >= MAX_FINDINGS:
            return
        self.tally.findings.append(
            {
                "path": rel,
                "kind": scan.budget.kind,
                "samples": len(found),
                "grams": sum(map(len, scan.result.hits.values())),
                "counted": counted,
                "place": place,
                "excerpt": scan.result.excerpt[:300],
                "t": round(time.monotonic() - self.started, 3),
            }
        )

    # -- events ------------------------------------------------------------------------------

    def on_event(self, ev: Event, now: float) -> bool:
        """Handle one event; True when a full scan is due (the queue overflowed)."""
        if ev.mask & IN_Q_OVERFLOW:
            self.counts["overflows"] += 1
            return True
        path = os.path.join(ev.directory, ev.name) if ev.name else ev.directory
        if ev.is_dir:
            if ev.mask & (IN_CREATE | IN_MOVED_TO):  # made, or moved in whole
                self._watch(path)
                for sub, st in self._walk_new(path):
                    if stat.S_ISREG(st.st_mode):
                        self.written(sub, now)
            return False
        if ev.name and not ev.mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM):
            self.written(path, now)
        return False

    def _walk_new(self, directory: str) -> Iterator[tuple[str, os.stat_result]]:
        """A directory that just appeared (files may be in it before its watch was)."""
        yield from self._descend([directory], False)

    def written(self, path: str, now: float) -> None:
        """A file was written: read it now, or hold it open until its window ends."""
        rel = self.rel(path)
        until, window = self.backoff.get(rel, (0.0, DEBOUNCE_FIRST / 2))
        if now >= until or len(self.held) >= MAX_HELD:
            window = min(window * 2, DEBOUNCE_MAX) if now < until + window else DEBOUNCE_FIRST
            self.backoff[rel] = (now + window, window)
            self.capture(path)
            return
        if rel in self.held:
            return  # already held: the read at the window's end sees this write too
        fd = self._open(path, rel, False)
        if fd is not None:
            self.held[rel] = _Held(fd, until)

    def due(self, now: float, everything: bool = False) -> None:
        """Read the held paths whose window ended."""
        for rel, held in list(self.held.items()):
            if everything or now >= held.due:
                del self.held[rel]
                self.capture(str(self.root / rel), fd=held.fd)

    def scan_all(self, final: bool = False) -> int:
        """Read every file whose identity changed; how many files there are."""
        self.counts["scans"] += 1
        files = 0
        for path, st in self.walk(final):
            if stat.S_ISREG(st.st_mode):
                files += 1
                rel = self.rel(path)
                last = self.seen.get(rel)
                sig = sig_of(st)
                if self.baseline.get(rel) != sig and (last is None or last.sig != sig):
                    self.capture(path, final=final)
        return files

    # -- the record --------------------------------------------------------------------------

    def finish(self, files: int) -> dict[str, Any]:
        """The record, once the final scan read everything (files: how many are left)."""
        for finding in [*self.tally.findings, *self.tally.mentions]:
            finding["gone"] = not self._exists(finding["path"])
        for rel in sorted(r for r in self.unreadable if not self._exists(r)):
            self.tally.fail(rel, "a file the recorder could not open (its mode), gone before the end")
        self.index_file.close()
        return self.record(files)

    def _exists(self, rel: str) -> bool:
        return os.path.lexists(self.root / rel)

    def record(self, files: int) -> dict[str, Any]:
        t = self.tally
        index = self.index
        found = sorted(i for i, gs in t.hits.items() if index and len(gs) >= self._overlap * index.grams_of[i])
        from_sources = sorted(
            i for i, gs in t.source_hits.items() if index and len(gs) >= self._overlap * index.grams_of[i]
        )
        why = self._incomplete()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "complete": not why,
            "incomplete": why,
            "test_set": {
                "samples": index.samples if index else None,
                "sha256": self.test_sha256,
                "samples_with_grams": index.with_grams if index else None,
                "n": self.config.ngram_n,
                "sample_overlap": self._overlap,
                "error": self.test_error,
            },
            "contamination": {
                "found": found[:5000],
                "found_count": len(found),
                "examples": [{"sample": i, "files": t.files_of.get(i, [])} for i in found[:10]],
                "in_test_set_places": len(from_sources),
            },
            "files_with_test_samples": t.files_with_test_samples,
            "findings": t.findings,
            "mentions": t.mentions,
            "mentions_count": t.mentions_count,
            "lost": {"count": t.lost_count, "paths": t.lost},
            "counts": {**self.counts, "files_at_end": files, "baseline_files": len(self.baseline)},
            "roots": self.config.roots,
            "watching": self.watching,
            "seconds": round(time.monotonic() - self.started, 3),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
            "max_rss_kb": peak_rss_kb(),
            "memory_max_bytes": memory_cap(),
        }

    def _incomplete(self) -> list[str]:
        t, why = self.tally, []
        if self.test_error:
            why.append(f"the test set could not be loaded: {self.test_error}")
        if self.too_many:
            why.append(f"the job dir held more than {self.config.max_files} files and directories")
        if t.incomplete_count:
            listed = "; ".join(f"{x['path']}: {x['why']}" for x in t.incomplete[:5])
            why.append(f"{t.incomplete_count} file(s) not read in full: {listed}")
        return why


def next_wait(now: float, next_scan: float, held_due: Iterable[float], most: float = WAIT_MAX_S) -> float:
    """How long the recorder's loop may block on inotify: until the next scan or the first
    held path's window ends, whichever is sooner, never below 0 nor above ``most``. Every
    argument is on one clock (``time.monotonic``): a deadline of another clock makes the
    wait meaningless (a wall-clock due against a monotonic now never blocks, and the loop
    spins a core)."""
    until = min(next_scan, min(held_due, default=next_scan))
    return min(max(until - now, 0.0), most)


def run(config: RecorderConfig, samples: Any, out: Any) -> dict[str, Any]:
    """The recorder's life: baseline, 'ready', events and scans until SIGTERM, the final
    scan, the record. samples: the test samples (a list), None (the task has none) or
    {"error": why they could not be loaded}."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    redact = Redactor(secrets_from_env(config.secret_names, os.environ))
    error = str(samples.get("error")) if isinstance(samples, dict) else None
    index = NgramIndex(samples, config.ngram_n) if isinstance(samples, list) else None
    rec = Recorder(config, index, error, redact)
    rec.test_sha256 = samples_sha256(samples) if isinstance(samples, list) else None
    rec.take_baseline()
    out.write("ready\n")
    out.flush()
    next_scan = time.monotonic() + config.scan_seconds
    while not stop:
        wait = next_wait(time.monotonic(), next_scan, (h.due for h in rec.held.values()))
        overflow = False
        for ev in rec.inotify.read(wait):
            overflow |= rec.on_event(ev, time.monotonic())
        rec.due(time.monotonic())
        if overflow or time.monotonic() >= next_scan:
            rec.scan_all()
            next_scan = time.monotonic() + config.scan_seconds
    for ev in rec.inotify.read(0):
        rec.on_event(ev, time.monotonic())
    rec.due(time.monotonic(), everything=True)
    files = rec.scan_all(final=True)
    rec.inotify.close()
    record = rec.finish(files)
    atomic_write_json(Path(config.out_dir) / EVIDENCE, record)
    return record


def record_once(config: RecorderConfig, samples: Any, between: Any) -> dict[str, Any]:
    """The recorder's life in this process, without its events: the baseline, between()
    (what the agent does), the final scan, the record. For tools and tests that need a
    cell's evidence fast; a solve runs the process (``run``)."""
    error = str(samples.get("error")) if isinstance(samples, dict) else None
    index = NgramIndex(samples, config.ngram_n) if isinstance(samples, list) else None
    rec = Recorder(config, index, error, Redactor(secrets_from_env(config.secret_names, os.environ)))
    rec.test_sha256 = samples_sha256(samples) if isinstance(samples, list) else None
    rec.take_baseline()
    between()
    files = rec.scan_all(final=True)
    rec.inotify.close()
    record = rec.finish(files)
    atomic_write_json(Path(config.out_dir) / EVIDENCE, record)
    return record


def memory_cap() -> int | None:
    """The memory cap in force (RLIMIT_DATA's soft limit, read back), or None."""
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    return None if soft == resource.RLIM_INFINITY else soft


def cap_memory(limit: int | None) -> None:
    """RLIMIT_DATA at limit (never above a hard limit already lower): past it an allocation
    fails (MemoryError, pyarrow's ArrowMemoryError) instead of growing into the node's memory."""
    if limit is None:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def out_of_memory_record(config: RecorderConfig) -> dict[str, Any]:
    """The record of a recorder that ran out of memory outside any one file's read (its
    walk, its events): incomplete, naming the cap."""
    why = f"the evidence recorder stopped: {config.out_of_memory}"
    return {"complete": False, "incomplete": [why], "memory_max_bytes": memory_cap()}


def main(argv: list[str] | None = None) -> int:
    """CONFIG (RecorderConfig as JSON); the test samples come on stdin (a JSON list, or
    {"error": why})."""
    args = sys.argv[1:] if argv is None else argv
    config = RecorderConfig.read(Path(args[0]))
    cap_memory(config.memory_max_bytes)  # before anything of the agent's is read
    samples = json.loads(sys.stdin.read() or "null")
    with contextlib.suppress(BrokenPipeError):
        try:
            run(config, samples, sys.stdout)
        except MemoryError:
            atomic_write_json(Path(config.out_dir) / EVIDENCE, out_of_memory_record(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
