"""Redact secrets from trace bytes: the literal values the harness knows, longest first,
as `[REDACTED:<NAME>]`, then well-known token shapes."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

from ptb_harness.core.secrets import secret_needles
from ptb_harness.traces.lines import MAX_LINE

#: Name patterns of variables whose values count as secrets wherever they are set.
SECRET_NAME = re.compile(
    r"(_API_KEY|_KEY|_TOKEN|_SECRET|_PASSWORD|_PASSWD|_PASS|_PWD|_ACCESS_KEY|_CREDENTIALS?)$"
    r"|^(HF_TOKEN|HUGGING_FACE_HUB_TOKEN|PASSWORD|PASSWD)$",
    re.I,
)
#: well-known token shapes: (literal markers, pattern, label). A pattern runs only on
#: data holding one of its markers: a plain scan for bytes is far cheaper than a regex.
_SHAPES = [
    ((b"sk-",), re.compile(rb"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}"), "sk-token"),
    ((b"hf_",), re.compile(rb"hf_[A-Za-z0-9]{30,}"), "hf-token"),
    ((b"gh",), re.compile(rb"github_pat_[A-Za-z0-9_]{40,}|gh[pousr]_[A-Za-z0-9]{30,}"), "github-token"),
    ((b"AKIA",), re.compile(rb"AKIA[0-9A-Z]{16}"), "aws-key"),
    ((b"xox",), re.compile(rb"xox[abpr]-[A-Za-z0-9-]{10,}"), "slack-token"),
    ((b"AIza",), re.compile(rb"AIza[0-9A-Za-z_\-]{35}"), "google-api-key"),
]


def secrets_from_env(names: Iterable[str], env: Mapping[str, str]) -> dict[str, str]:
    """The values of the named variables plus every secret-looking variable of env."""
    wanted = set(names) | {k for k in env if SECRET_NAME.search(k)}
    return {k: env[k] for k in sorted(wanted) if k in env}


class Redactor:
    def __init__(self, secrets: Mapping[str, str]):
        # the literal values and their base64 forms, longest first, so a secret that
        # contains another is replaced whole
        self.pairs = [(needle, f"[REDACTED:{name}]".encode()) for needle, name in secret_needles(secrets)]
        self.hits: Counter = Counter()

    def copy(self) -> Redactor:
        """The same secrets with its own counts."""
        other = Redactor({})
        other.pairs = self.pairs
        return other

    def __call__(self, data: bytes) -> bytes:
        for value, label in self.pairs:
            if value in data:
                self.hits[label.decode()] += data.count(value)
                data = data.replace(value, label)
        for markers, pattern, name in _SHAPES:
            if any(m in data for m in markers):
                label = f"[REDACTED:{name}]"
                data, n = pattern.subn(label.encode(), data)
                self.hits[label] += n
        return data


def redact_stream(src: BinaryIO, dst: BinaryIO, redact: Redactor, block: int = 1 << 20) -> int:
    """Copy src to dst redacted, in line-aligned blocks of about `block` bytes (secrets
    never span lines, so a block is scanned whole). A line longer than MAX_LINE is
    dropped, so one runaway line cannot take the memory. Returns the lines dropped."""
    carry = b""
    dropped = 0
    skipping = False  # inside a dropped line, until its newline
    while chunk := src.read(block):
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                continue
            chunk, skipping = chunk[nl + 1 :], False
        data = carry + chunk
        nl = data.rfind(b"\n")
        carry = data[nl + 1 :]
        if nl >= 0:
            dst.write(redact(data[: nl + 1]))
        if len(carry) > MAX_LINE:
            carry, skipping = b"", True
            dropped += 1
    if carry:
        dst.write(redact(carry))
    return dropped


class RedactedFile:
    """A file that receives plain bytes and stores them redacted.

    With `parallel`, a forked child does the redaction (and, given `source`, also the
    reading): the scan then costs the caller one pipe write per block, or nothing.
    `close()` returns the redaction counts and raises if the child failed."""

    def __init__(self, path: Path, redact: Redactor, *, source: Path | None = None, parallel: bool = False):
        self.path, self.redact = Path(path), redact.copy()
        redact = self.redact
        self._pid = 0
        self._dst: BinaryIO | None = None
        self._pipe: BinaryIO | None = None
        if not parallel:
            self._dst = open(self.path, "wb")  # noqa: SIM115 - held until close() or abort()
            if source is not None:
                with open(source, "rb") as src:
                    redact_stream(src, self._dst, redact)
            return
        feed_r, feed_w = (None, None) if source is not None else os.pipe()
        result_r, result_w = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # nothing buffered may be written twice
            stream.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; its work is asserted through the file
            code = 1
            try:
                os.close(result_r)
                if feed_w is not None:
                    os.close(feed_w)
                feed = open(source, "rb") if source is not None else os.fdopen(feed_r, "rb", 1 << 20)  # noqa: SIM115
                with feed as src, open(self.path, "wb") as dst:
                    redact_stream(src, dst, redact)
                message = json.dumps({"hits": dict(redact.hits)})
                code = 0
            except BaseException as e:  # reported to the parent, which raises
                message = json.dumps({"error": f"{type(e).__name__}: {e}"})
            os.write(result_w, message.encode())
            os._exit(code)
        self._pid = pid
        os.close(result_w)
        self._result = result_r
        if feed_w is not None:
            os.close(feed_r)
            with contextlib.suppress(OSError):  # a pipe as big as a block: the writer rarely waits
                fcntl.fcntl(feed_w, fcntl.F_SETPIPE_SZ, 1 << 20)
            self._pipe = os.fdopen(feed_w, "wb", buffering=0)

    def write(self, data: bytes) -> None:
        if self._pipe is not None:
            try:
                self._pipe.write(data)
            except BrokenPipeError:  # the child stopped early: close() raises its reason
                self._pipe.close()
                self._pipe = None
                self.close()
                raise
        elif self._dst is not None:
            self._dst.write(self.redact(data))

    def close(self) -> Counter:
        """The redaction counts of everything written (or read from source)."""
        if not self._pid:
            if self._dst is not None:
                self._dst.close()
                self._dst = None
            return Counter(self.redact.hits)
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None
        with os.fdopen(self._result, "rb") as f:
            reply = json.loads(f.read() or b'{"error": "the redacting process died"}')
        _, status = os.waitpid(self._pid, 0)
        self._pid = 0
        if "error" in reply or status != 0:
            raise RuntimeError(f"redacting {self.path.name} failed: {reply.get('error', f'status {status}')}")
        return Counter(reply["hits"])

    def abort(self) -> None:
        """Stop the child (if any) without waiting for its result; used on errors."""
        for f in (self._pipe, self._dst):
            if f is not None:
                f.close()
        self._pipe = self._dst = None
        if self._pid:
            os.close(self._result)
            os.kill(self._pid, signal.SIGKILL)  # our own child: its partial file is discarded
            os.waitpid(self._pid, 0)
            self._pid = 0


class BlockWriter:
    """Buffers whole lines and writes them in blocks of about 1 MB to each target: per
    line, a list append; per block, one write (and one secret scan) per target."""

    def __init__(self, *targets: BinaryIO | RedactedFile, block: int = 1 << 20):
        self.targets, self.block = targets, block
        self.parts: list[bytes] = []
        self.size = 0

    def write(self, data: bytes) -> None:
        self.parts.append(data)
        self.size += len(data)
        if self.size >= self.block:
            self.flush()

    def flush(self) -> None:
        if not self.parts:
            return
        data = b"".join(self.parts)
        self.parts, self.size = [], 0
        for target in self.targets:
            target.write(data)
