"""Word n-gram overlap with a test set, streamed: which test samples occur in a text.

A text is lowercased and cut into alphanumeric words (punctuation, case and spacing do
not hide a copy). A test sample's grams are its word n-grams (``n`` = 13 by default); a
sample shorter than n words but of at least ``max(5, n // 2)`` is one gram of its own
length, and a shorter one has none (too short to tell a copy from chance). A sample is
found when at least ``sample_overlap`` of its grams occur in what was scanned.

The scan is vectorised: each word becomes the id of that word in the test set's
vocabulary (0 for any other word), each window of k ids a 64-bit polynomial hash, and
only windows whose hash is a test gram's are compared exactly. Text arrives as pieces
(``Piece``): a piece that starts a record (a row, a line of JSON, an archive member)
never forms a gram with the record before it, and the scan counts the records that hold
any test gram, so a file can be told to be nothing but test samples (``pure``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")
#: words held before they are scanned together (bounds the scan's memory)
BATCH_WORDS = 1 << 20
_P = np.uint64(1_000_003)


def words(text: str) -> list[str]:
    """Lowercased alphanumeric words."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Piece:
    """Some text of a file; ``new_record`` when it starts a record of its own."""

    text: str
    new_record: bool = True


def sample_grams(sample: str, n: int) -> list[tuple[str, ...]]:
    """A sample's grams (see the module's rule for short samples)."""
    ws = words(sample)
    if len(ws) < n:
        return [tuple(ws)] if len(ws) >= max(5, n // 2) else []
    return [tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)]


class NgramIndex:
    """The test set's grams, ready to scan texts against."""

    def __init__(self, samples: Sequence[str], n: int = 13):
        self.n = n
        self.samples = len(samples)
        self.vocab: dict[str, int] = {}
        self._words: list[str] = []
        #: gram (as word ids) -> its id; gram id -> the samples holding it
        self.gram_id: dict[tuple[int, ...], int] = {}
        self.gram_samples: list[list[int]] = []
        #: per sample, how many distinct grams it has
        self.grams_of: list[int] = []
        for i, sample in enumerate(samples):
            own = {self._gram(g) for g in sample_grams(sample, n)}
            self.grams_of.append(len(own))
            for g in own:
                self.gram_samples[g].append(i)
        self.gram_ids: list[tuple[int, ...]] = list(self.gram_id)
        #: a gram's hash -> the grams with that hash; per gram length, the sorted hashes
        self.by_hash: dict[int, list[int]] = {}
        by_length: dict[int, list[int]] = {}
        for ids, gram in self.gram_id.items():
            h = int(_hash_one(ids))
            self.by_hash.setdefault(h, []).append(gram)
            by_length.setdefault(len(ids), []).append(h)
        self.hashes: dict[int, np.ndarray] = {
            k: np.unique(np.array(hs, dtype=np.uint64)) for k, hs in by_length.items()
        }

    def _gram(self, gram: tuple[str, ...]) -> int:
        ids = tuple(self.vocab.setdefault(w, len(self.vocab) + 1) for w in gram)
        if ids not in self.gram_id:
            self.gram_id[ids] = len(self.gram_samples)
            self.gram_samples.append([])
        return self.gram_id[ids]

    @property
    def with_grams(self) -> int:
        """How many samples have any gram (the others cannot be found)."""
        return sum(1 for g in self.grams_of if g)

    def word_of(self, word_id: int) -> str:
        if len(self._words) != len(self.vocab):
            self._words = ["", *self.vocab]
        return self._words[word_id]


def _hash_one(ids: Sequence[int]) -> np.uint64:
    h = np.uint64(0)
    with np.errstate(over="ignore"):
        for x in ids:
            h = h * _P + np.uint64(x)
    return h


@dataclass
class ScanResult:
    """What one scan found: per sample, the ids of its grams seen."""

    hits: dict[int, set[int]] = field(default_factory=dict)
    words: int = 0
    #: records with at least one gram's worth of words, and those holding a test gram
    records: int = 0
    records_matched: int = 0
    #: the first test gram seen, as its words (what to quote)
    excerpt: str = ""

    def found(self, index: NgramIndex, overlap: float) -> list[int]:
        """The samples this scan alone finds."""
        return sorted(i for i, gs in self.hits.items() if len(gs) >= overlap * index.grams_of[i])

    @property
    def pure(self) -> bool:
        """Every record of some length holds a test gram: nothing but test samples."""
        return self.records > 0 and self.records_matched == self.records


class Scanner:
    """Scans pieces of text against an index; ``finish`` says what it found."""

    def __init__(self, index: NgramIndex):
        self.index = index
        self.result = ScanResult()
        #: the word ids held, and where each record starts in them (position, record)
        self._parts: list[np.ndarray] = []
        self._held = 0
        self._starts: list[tuple[int, int]] = [(0, 0)]
        self._record = -1
        self._record_words = 0
        self._counted: set[int] = set()
        self._matched: set[int] = set()
        self._min = min(index.hashes, default=index.n)
        #: test-set words among those held: fewer than a gram's worth hold no gram
        self._known = 0
        self._keep = max(index.hashes, default=1) - 1

    def feed(self, pieces: Iterable[Piece]) -> None:
        for piece in pieces:
            self.add(piece)

    def add(self, piece: Piece) -> None:
        ws = words(piece.text)
        if piece.new_record or self._record < 0:
            self._new_record()
        self.result.words += len(ws)
        self._record_words += len(ws)
        if self._record_words >= self._min:
            self._counted.add(self._record)
        if ws:
            get = self.index.vocab.get
            ids = np.fromiter(map(get, ws, repeat(0)), dtype=np.uint64, count=len(ws))
            self._known += int(np.count_nonzero(ids))
            self._parts.append(ids)
            self._held += len(ws)
        if self._held >= BATCH_WORDS:
            self._scan(keep=self._keep)

    def _new_record(self) -> None:
        self._record += 1
        self._record_words = 0
        if self._held:
            self._parts.append(_SEPARATOR)  # no gram spans two records
            self._held += 1
        self._starts.append((self._held, self._record))

    def finish(self) -> ScanResult:
        self._scan(keep=0)
        self.result.records = len(self._counted)
        self.result.records_matched = len(self._matched & self._counted)
        return self.result

    def _scan(self, keep: int) -> None:
        """Scan the held words; keep the last ``keep`` for grams that go on past them."""
        if not self._parts:
            return
        a = np.concatenate(self._parts)
        if self._known >= self._min:  # fewer test-set words than a gram has: no gram to find
            self._find(a)
        cut = max(len(a) - keep, 0)
        self._parts = [a[cut:]] if cut < len(a) else []
        self._held = len(a) - cut
        self._known = int(np.count_nonzero(a[cut:]))
        self._starts = [(0, self._record)]

    def _find(self, a: np.ndarray) -> None:
        starts = np.array([p for p, _ in self._starts], dtype=np.int64)
        records = np.array([r for _, r in self._starts], dtype=np.int64)
        for k, hashes in self.index.hashes.items():
            pos, h = _candidates(a, k, hashes)
            if len(pos):
                self._hits(h, records[np.searchsorted(starts, pos, side="right") - 1])

    def _hits(self, hashes: np.ndarray, records: np.ndarray) -> None:
        self._matched.update(np.unique(records).tolist())
        for h in np.unique(hashes).tolist():
            for gram in self.index.by_hash.get(h, ()):
                for sample in self.index.gram_samples[gram]:
                    self.result.hits.setdefault(sample, set()).add(gram)
                if not self.result.excerpt:
                    self.result.excerpt = " ".join(self.index.word_of(i) for i in self.index.gram_ids[gram])


_SEPARATOR = np.zeros(1, dtype=np.uint64)


def _candidates(a: np.ndarray, k: int, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start positions, hashes) of the windows of k ids, none of them 0, whose hash is a
    test gram's. The 64-bit hash is not checked word by word: two different windows share
    a hash with a chance of about 2**-64 each."""
    empty = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64)
    if len(a) < k:
        return empty
    zeros = np.concatenate(([0], np.cumsum(a == 0)))
    whole = (zeros[k:] - zeros[:-k]) == 0
    if not whole.any():
        return empty
    starts = np.flatnonzero(whole)
    h = np.zeros(len(starts), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(k):
            h = h * _P + a[starts + j]
    at = np.minimum(np.searchsorted(hashes, h), len(hashes) - 1)
    hit = hashes[at] == h
    return starts[hit], h[hit]


def scan_text(index: NgramIndex, pieces: Iterable[Piece]) -> ScanResult:
    """One scan of the pieces."""
    scanner = Scanner(index)
    scanner.feed(pieces)
    return scanner.finish()
