"""``llm_log.jsonl``: one line per request the gateway answered, the authoritative record
of what the agent asked its model and what it was told.

Each line: ``n``, ``attempt``, ``time`` (UTC, when the request arrived), ``method``,
``path`` (without the query), ``protocol``, ``model``, ``stream``, ``status`` (0: the
provider could not be reached), ``latency_ms`` (arrival to the answer's end), ``ttfb_ms``
(to the provider's headers), ``usage`` (the answer's own tokens, or null), ``cost_usd``
and ``price_source``, ``refused`` (why the gateway answered itself: ``token``, ``path``,
``llm_budget``, ``unpriced``, ``body``; else null), ``error`` (what went wrong on the
way, else null), ``usage_unreadable`` (why a successful model call's usage could not be
read, else null: under a token or USD limit the session ends), ``request`` and
``response`` (``bytes``: the body's size; ``body``: the body, every secret redacted, cut
to its head and tail past the size cap, ``cut``: bytes left out) and ``totals`` (the
meter after this request).
"""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path
from typing import Any

from ptb_harness.core.cell_files import LLM_LOG
from ptb_harness.traces.redact import Redactor

LOG_NAME = LLM_LOG  # named in core.cell_files


class HeadTail:
    """The first ``head`` bytes and at least the last ``tail`` bytes of a body received in
    chunks, and its size. A chunk past the head is kept by reference, not copied, and let
    go whole once the chunks after it hold ``tail`` bytes: the work per chunk stays the
    same whatever the chunk's or the body's size (a stream passes the gateway chunk by
    chunk; each copy and search per chunk cost it throughput)."""

    def __init__(self, head: int, tail: int):
        self.head_limit, self.tail_limit = head, tail
        self.head = bytearray()
        self.chunks: deque[bytes] = deque()
        self.tail_bytes = 0
        self.size = 0

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
            if not chunk:
                return
        self.chunks.append(chunk)
        self.tail_bytes += len(chunk)
        keep = self._pinned(chunk)
        while len(self.chunks) > keep and self.tail_bytes - len(self.chunks[0]) >= self.tail_limit:
            self.tail_bytes -= len(self.chunks.popleft())

    def _pinned(self, chunk: bytes) -> int:
        """How many of the last chunks must be kept whatever the tail's size (none here)."""
        return 0

    @property
    def dropped(self) -> int:
        """Bytes between the head and the tail that were let go."""
        return self.size - len(self.head) - self.tail_bytes

    def parts(self) -> tuple[bytes, bytes]:
        """(head, tail): the tail is everything after the head while nothing was dropped."""
        return bytes(self.head), b"".join(self.chunks)


class CappedBody(HeadTail):
    """A body received in chunks, kept as its head and tail past ``limit`` bytes.

    The cut never leaves part of a secret in the log: ``margin`` is more than the longest
    secret pattern (see ``record``)."""

    def __init__(self, limit: int, margin: int):
        self.limit, self.margin = limit, margin
        super().__init__(limit // 2 + margin, limit - limit // 2 + margin)

    def record(self, redact: Redactor) -> dict[str, Any]:
        head, tail = self.parts()
        if self.size <= self.limit + 2 * self.margin:  # whole: nothing to gain by a cut
            data = redact(head + tail)
            return {"bytes": self.size, "body": data.decode("utf-8", "replace"), "cut": 0}
        # each side is redacted with `margin` bytes more than it keeps: a secret across
        # the cut is whole there and replaced; a part of one at the window's edge is in
        # the margin, which is then dropped
        margin = self.margin
        head = redact(head)[:-margin]
        tail = redact(tail[-self.tail_limit :])[margin:]
        cut = self.size - self.limit
        text = head + f"\n[... gateway: {cut} bytes cut ...]\n".encode() + tail
        return {"bytes": self.size, "body": text.decode("utf-8", "replace"), "cut": cut}


class RequestLog:
    """Appends lines to the cell's llm_log.jsonl (owner-only), one write per line."""

    def __init__(self, path: Path, redact: Redactor, max_body_bytes: int, attempt: int):
        self.path = Path(path)
        self.redact = redact
        self.max_body_bytes = max_body_bytes
        self.attempt = attempt
        self.margin = max((len(needle) for needle, _ in redact.pairs), default=0) + 64
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.lines = 0

    def body(self) -> CappedBody:
        return CappedBody(self.max_body_bytes, self.margin)

    def write(self, entry: dict[str, Any]) -> None:
        self.lines += 1
        line = {"n": self.lines, "attempt": self.attempt, **entry}
        os.write(self._fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
