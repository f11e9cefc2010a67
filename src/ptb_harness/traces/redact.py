"""Redact secrets from trace bytes: the literal values the harness knows, longest first,
as `[REDACTED:<NAME>]`, then well-known token shapes."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import BinaryIO

MIN_SECRET_LEN = 8
#: Values that are placeholders, not secrets (redacting them would blank ordinary text).
_PLACEHOLDER = re.compile(r"^(x+|\*+|<[^>]*>|your[-_ ].*|changeme|placeholder.*|dummy.*|none|null|true|false)$", re.I)
#: Name patterns of variables whose values count as secrets wherever they are set.
SECRET_NAME = re.compile(r"(_API_KEY|_TOKEN|_SECRET|_PASSWORD|_ACCESS_KEY)$|^HF_TOKEN$|^HUGGING_FACE_HUB_TOKEN$")
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
        pairs = [
            (v.encode(), f"[REDACTED:{k}]".encode())
            for k, v in secrets.items()
            if isinstance(v, str) and len(v) >= MIN_SECRET_LEN and not _PLACEHOLDER.match(v)
        ]
        # longest first, so a secret that contains another is replaced whole
        self.pairs = sorted(pairs, key=lambda p: -len(p[0]))
        self.hits: Counter = Counter()

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


class BlockWriter:
    """Buffers whole lines and writes them in blocks of about 1 MB, to one file as they
    are and, redacted, to another: a secret scan costs per block, not per line (secrets
    never span lines)."""

    def __init__(self, plain: BinaryIO | None, redacted: BinaryIO | None, redact: Redactor, block: int = 1 << 20):
        self.plain, self.redacted, self.redact, self.block = plain, redacted, redact, block
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
        if self.plain is not None:
            self.plain.write(data)
        if self.redacted is not None:
            self.redacted.write(self.redact(data))
