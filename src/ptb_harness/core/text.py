"""Text that an agent (or a scorer, or a judge's model) controls, made safe for where it
is shown: one helper per output kind, used by every writer of that kind.

An agent names the files it leaves, writes its model's config and its trace, and those
words reach the evidence, the judge's justification and the tables. Anywhere outside
HTML (which is escaped by ``html.escape`` where it is written) they stay text:

- ``terminal_line``: one line for a terminal or a log. Every character that moves the
  cursor, starts an escape sequence, ends a line or hides or reorders text (C0 and C1
  controls, DEL, bidi overrides and isolates, zero-width and other format characters,
  line and paragraph separators, lone surrogates of undecodable bytes) is shown as its
  Python escape (``\\n``, ``\\x1b``, ``\\u202e``), and a backslash as ``\\\\``, so the
  result reads back to exactly the original (it is injective). ``TerminalLogFormatter``
  applies it to every log message.
- ``markdown_cell`` (``markdown_row``, ``markdown_table``): a GitHub-flavoured Markdown
  table cell: the visible escapes, then ``|``, backslash, backtick, ``~``, a ``]`` before
  ``(`` and every ``*`` and ``_`` that could open emphasis backslash-escaped, ``<``, ``>``, ``&`` as
  entities: no raw HTML, code span, link, emphasis or new row; the cell renders as its
  ``terminal_line`` reads (so the rendered text is injective too).
- ``csv_field``: a CSV field: the visible escapes (one record per line whatever the
  reader), and a leading ``'`` on a field that starts with ``=``, ``+``, ``-``, ``@`` (a
  formula to a spreadsheet) or ``'`` (so the prefix can be told from the data), unless
  the field is a plain number.

- ``transcript_text`` (``transcript_event``, ``transcript_label``, ``transcript_line_bytes``): a line of the
  readable transcript (``traces``). A multi-line value goes on over continuation lines,
  each starting with ``TRANSCRIPT_CONTINUATION`` (which no event line, `[time] KIND: ...`,
  `KIND: ...` or the header's `# ...`, starts with), and every character some reader
  takes for a line break, a cursor move or a reordering (C0 but the tab, DEL, C1, U+2028,
  U+2029, bidi controls) is shown as its escape: no text a tool prints starts a line of
  the transcript that looks like an event the harness rendered. Not injective (a
  backslash stays as it is): the transcript is for reading, the raw trace is kept.

``valid_text`` makes text that holds a lone surrogate storable (U+FFFD in its place) for
the writers that keep text as it is (pandas tables, the viewer's HTML, JSON).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

#: Unicode categories never written raw: controls, format characters (bidi, zero-width,
#: BOM, soft hyphen, tags), line/paragraph separators, surrogates (undecodable bytes)
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(c: str) -> str:
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _hidden(c: str) -> bool:
    return c in _NAMED or unicodedata.category(c) in _HIDDEN_CATEGORIES


_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """text with every lone surrogate (an undecodable byte of a file name the agent chose,
    a `\\udcff` escape in JSON it shaped) as U+FFFD: what a UTF-8 file, JSON reader and
    pandas' string columns accept (pandas raises on a lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def terminal_line(text: object) -> str:
    """str(text) as one line safe to print to a terminal or write to a log: every hidden
    or line-breaking character as its visible escape, a backslash doubled."""
    s = str(text)
    if s.isprintable() and "\\" not in s:  # the common case: nothing to escape
        return s
    return "".join(_escape_char(c) if _hidden(c) else c for c in s)


#: how a continuation line of a transcript's multi-line value starts: an event line starts
#: with `[` (its time), a KIND (no time) or `#` (the header), never with a space
TRANSCRIPT_CONTINUATION = "  | "
_NEW_CONTINUATION_LINE = "\n" + TRANSCRIPT_CONTINUATION
#: line breaks, cursor moves and reorderings in transcript text (the tab is kept)
_TRANSCRIPT_BREAKS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
#: the same less the newline (which starts a continuation line instead)
_TRANSCRIPT_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
#: their UTF-8, in a line as read (no newline in it)
_TRANSCRIPT_CONTROL_BYTES = re.compile(
    rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]"
)


def _escaped_match(m: re.Match[str]) -> str:
    return _escape_char(m.group())


def transcript_text(text: str) -> str:
    """One rendered transcript line's text: its hidden characters escaped, each of its own
    lines after the first a continuation line."""
    # most lines: printable (no control, no separator: a scan twice as fast as the search)
    if text.isprintable():
        return text
    if text.replace("\n", " ").replace("\t", " ").isprintable():  # most tools' outputs: lines, tabs
        return _continued(text)
    if _TRANSCRIPT_BREAKS.search(text) is None:
        return text
    if _TRANSCRIPT_CONTROLS.search(text) is not None:
        text = _TRANSCRIPT_CONTROLS.sub(_escaped_match, text)
    return _continued(text)


def transcript_label(value: object) -> str:
    """str(value) within one transcript line (a tool's name, a call id, a header fact):
    its newlines escaped too."""
    text = str(value)
    if text.isprintable() or _TRANSCRIPT_BREAKS.search(text) is None:
        return text
    return _TRANSCRIPT_CONTROLS.sub(_escaped_match, text).replace("\n", "\\n")


def _escaped_bytes(m: re.Match[bytes]) -> bytes:
    return _escape_char(m.group().decode()).encode()


#: the ASCII characters transcript_text leaves as they are: the printable ones and the tab
_ASCII_KEPT = b"\t" + bytes(range(0x20, 0x7F))


def _ascii_controls(data: bytes) -> int | None:
    """How many ASCII characters transcript_text changes (the controls but the tab, DEL;
    the newline among them) data holds, or None when it is not ASCII: what is left once
    the others are deleted, at C speed, some 5 times faster than a regular expression's
    search."""
    return len(data.translate(None, _ASCII_KEPT)) if data.isascii() else None


def _continued(text: str) -> str:
    return text.replace("\n", _NEW_CONTINUATION_LINE)


def transcript_event(prefix: str, texts: Sequence[str]) -> bytes:
    """One event's lines as the transcript writes them (UTF-8): each text prefix and its
    transcript_text. Checked on the bytes at once: ASCII with no control but the lines'
    own ends (nearly every event) is written as it is; ASCII whose only controls are
    newlines (a tool's output of many lines) gets its continuation lines alone."""
    sep = "\n" + prefix
    data = (prefix + sep.join(texts) + "\n").encode("utf-8", "replace")
    controls = _ascii_controls(data)
    if controls == len(texts):
        return data
    fix = _continued if controls == data.count(b"\n") else transcript_text
    return (prefix + sep.join(map(fix, texts)) + "\n").encode("utf-8", "replace")


def transcript_line_bytes(raw: bytes) -> bytes:
    """A line as read (bytes, no newline; undecodable bytes left as they are) with the
    UTF-8 of transcript_text's hidden characters escaped."""
    if _ascii_controls(raw) == 0 or _TRANSCRIPT_CONTROL_BYTES.search(raw) is None:
        return raw
    return _TRANSCRIPT_CONTROL_BYTES.sub(_escaped_bytes, raw)


class TerminalLogFormatter(logging.Formatter):
    """A log formatter whose message is one terminal_line (a newline or ESC an agent put
    in a file name, a scorer line or an error stays in its record); a traceback keeps its
    lines, each of them escaped."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        raw = record.message
        record.message = terminal_line(raw)
        try:
            return super().formatMessage(record)
        finally:
            record.message = raw

    def formatException(self, ei: Any) -> str:
        return "\n".join(terminal_line(line) for line in super().formatException(ei).split("\n"))

    def formatStack(self, stack_info: str) -> str:
        return "\n".join(terminal_line(line) for line in super().formatStack(stack_info).split("\n"))


_MD_BACKSLASHED = frozenset("\\|`*_~")
_MD_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def _cannot_open_emphasis(s: str, i: int) -> bool:
    """Whether the `*` or `_` at s[i] can never open emphasis (CommonMark: it is followed
    by whitespace or ends the text, or it is a `_` inside a word): then it stays as it is
    (`0.600* (1/2)`, `agent_failed`), and every other one is escaped."""
    after = s[i + 1] if i + 1 < len(s) else " "
    return after.isspace() or (s[i] == "_" and i > 0 and s[i - 1].isalnum() and after.isalnum())


def _markdown_char(s: str, i: int) -> str:
    c = s[i]
    if c in "*_" and _cannot_open_emphasis(s, i):
        return c
    if c == "]":  # `](` is where a link or image starts; a `[` alone is text (no definitions in a cell)
        return "\\]" if s[i + 1 : i + 2] == "(" else c
    if c in _MD_BACKSLASHED:
        return "\\" + c
    return _MD_ENTITIES.get(c, c)


def markdown_cell(value: object) -> str:
    """A value as the text of one Markdown table cell."""
    s = terminal_line(value)
    return "".join(_markdown_char(s, i) for i in range(len(s)))


def markdown_row(values: Iterable[object]) -> str:
    """One Markdown table row: `| a | b |`, each value a markdown_cell."""
    return "| " + " | ".join(markdown_cell(v) for v in values) + " |"


def markdown_table(head: Sequence[object], rows: Iterable[Iterable[object]]) -> list[str]:
    """The lines of a Markdown table: its head, the delimiter row, a markdown_row per row."""
    return [markdown_row(head), "|" + "---|" * len(head), *(markdown_row(r) for r in rows)]


_FORMULA_START = ("=", "+", "-", "@", "'")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def csv_field(value: object) -> object:
    """A text field for a CSV file (anything else is returned as it is)."""
    if not isinstance(value, str):
        return value
    s = terminal_line(value)
    if s.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(s):
        return "'" + s
    return s


def csv_text(frame: Any) -> str:
    """A pandas DataFrame as CSV text (no index), every text field a csv_field (numbers,
    booleans and missing values as pandas writes them)."""
    text = [c for c in frame.columns if frame[c].dtype.kind not in "biufcmM"]
    return frame.assign(**{c: frame[c].map(csv_field) for c in text}).to_csv(index=False)
