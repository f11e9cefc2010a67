"""Reading trace lines: prefixes stripped, JSON decoded, one line in memory at a time."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from ptb_harness.core.records import MAX_JSON_DEPTH, json_too_deep

#: A line longer than this is not decoded (counted as oversized), so one runaway line
#: cannot take the harness's memory.
MAX_LINE = 16 * 2**20

try:  # orjson parses trace lines about twice as fast as json; it is optional
    from orjson import JSONDecodeError as _JSONError
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - exercised where orjson is absent
    from json import JSONDecodeError as _JSONError
    from json import loads as _loads

_ISO = re.compile(rb"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?$")


@dataclass(slots=True)
class Line:
    raw: bytes  # the line as read, without its newline
    stamp: str  # the harness's (or another) timestamp prefix, '' if none
    body: bytes  # the line after prefixes
    obj: Any  # decoded JSON (a dict), or None


def strip_prefixes(line: bytes) -> tuple[str, bytes]:
    """Remove up to three bracketed prefixes (`[2026-...Z] `, `[agent] `) and a bare
    ISO timestamp; returns (timestamp found or '', rest)."""
    # fast path: the harness's own prefix, `[YYYY-MM-DDTHH:MM:SSZ] `
    if line[:1] == b"[" and line[21:23] == b"] " and line[20:21] == b"Z" and line[11:12] == b"T":
        rest = line[23:]
        if rest[:1] != b"[":
            return line[1:21].decode("ascii", "replace"), rest
    stamp = b""
    rest = line
    for _ in range(3):
        if rest[:1] == b"[":
            end = rest.find(b"]", 1, 66)
            if end < 0:
                break
            inner = rest[1:end]
            if _ISO.match(inner) and not stamp:
                stamp = inner
            rest = rest[end + 1 :]
            if rest[:1] == b" ":
                rest = rest[1:]
            continue
        if rest[:1].isdigit():
            space = rest.find(b" ", 10, 40)
            if space > 0 and _ISO.match(rest[:space]):
                stamp = stamp or rest[:space]
                rest = rest[space + 1 :]
                continue
        break
    return stamp.decode("ascii", "replace"), rest


def decode(body: bytes) -> Any:
    """The JSON object on a line, or None (noise, a foreign scalar, truncated JSON)."""
    b = body
    if b[:1] != b"{" or b[-1:] != b"}":
        b = body.strip()  # rarely needed: most lines are bare JSON
        if b[:1] != b"{" or b[-1:] != b"}":
            return None
    try:
        obj = _loads(b)
    except (_JSONError, ValueError, RecursionError):  # includes invalid UTF-8 and deep nesting
        return None
    if not isinstance(obj, dict):
        return None
    # an agent's line nested deeper than any CLI writes is noise (renderers recurse); the
    # full check only runs on lines with many brackets (a C-speed count first)
    if b.count(b"{") + b.count(b"[") > MAX_JSON_DEPTH and json_too_deep(obj, MAX_JSON_DEPTH):
        return None
    return obj


def read_lines(f: BinaryIO, counts: dict[str, int], decode_json: bool = True) -> Iterator[Line]:
    """Every line of f, decoded (prefixes and JSON only with decode_json); counts 'lines'
    and 'oversized'."""
    lines = 0
    while True:
        raw = f.readline(MAX_LINE)
        if not raw:
            return
        if len(raw) == MAX_LINE and not raw.endswith(b"\n"):
            counts["oversized"] = counts.get("oversized", 0) + 1  # counted, never decoded
            while (more := f.readline(MAX_LINE)) and not more.endswith(b"\n"):
                pass
            continue
        lines += 1
        counts["lines"] = lines
        raw = raw.rstrip(b"\r\n")
        if decode_json:
            stamp, body = strip_prefixes(raw)
            yield Line(raw, stamp, body, decode(body))
        else:
            yield Line(raw, "", raw, None)
