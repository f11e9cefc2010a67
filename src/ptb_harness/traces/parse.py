"""One streaming pass over a raw trace: transcript, sanitized raw and sanitized transcript.

The format is the one the agent declares (agent.json "trace_format"), else detected from
the first lines (detect.py). Every line that is an event of the format is rendered,
wherever it lies; every other non-blank line (a CLI's stack trace, installer output,
another tool's JSON, lines a tool forged into the CLI's stdout) is kept as a `TEXT:` line
in its place: nothing the agent said or did leaves the transcript, and no number of other
lines turns the trace into plain text.

Memory is constant in the trace's size: detection reads the first lines only, the
parse reads one line at a time, and the transcript's header (which needs the totals)
is written last by concatenating it with the body on disk.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ptb_harness.core.records import json_too_deep
from ptb_harness.core.text import TRANSCRIPT_CONTINUATION, transcript_event, transcript_line_bytes, transcript_text
from ptb_harness.traces.detect import DECLARABLE, detect, explains, first_session_start, too_few_events, votes
from ptb_harness.traces.formats import RENDERERS, Renderer
from ptb_harness.traces.lines import Line, read_lines, strip_prefixes
from ptb_harness.traces.redact import BlockWriter, RedactedFile, Redactor
from ptb_harness.traces.token_usage import TokenUsage

#: How many lines detection reads (a format shows itself long before).
DETECT_LINES = 5000
#: A file this small with no JSON line may be one pretty-printed object (gemini --output-format
#: json). Read whole, decoded and parsed, it costs ~20x its size in memory: kept small.
WHOLE_OBJECT_MAX = 4 * 2**20
#: From this size on, the redactions run in child processes beside the parse.
PARALLEL_MIN = 8 * 2**20


@dataclass
class TraceStats:
    format: str
    lines: int = 0
    #: the agent declared the format (agent.json), rather than it being detected
    declared: bool = False
    rendered_events: int = 0
    transcript_lines: int = 0
    noise_lines: int = 0
    foreign_json_lines: int = 0
    oversized_lines: int = 0
    redactions: Counter = field(default_factory=Counter)
    votes: dict[str, int] = field(default_factory=dict)
    #: usage.json: tokens, cost, turns, tool calls, resumes (None = the trace does not say)
    usage: dict = field(default_factory=dict)
    #: why a format that won the vote was not used ('' when it was)
    note: str = ""

    def summary(self) -> str:
        red = sum(self.redactions.values())
        return (
            f"{self.format} trace: {self.lines} lines, {self.rendered_events} events rendered, "
            f"{self.noise_lines} non-JSON lines and {self.foreign_json_lines} foreign JSON lines kept as text"
            + (f", {self.oversized_lines} oversized lines skipped" if self.oversized_lines else "")
            + f", {red} secret occurrence(s) redacted"
            + (f"; {self.note}" if self.note else "")
        )


def _declared(path: Path, fmt: str) -> tuple[str, Counter, WholeObject | None, str]:
    """What _detect returns, for a format the agent declares: nothing is voted."""
    if fmt != "gemini_json":
        return fmt, Counter(), None, ""
    whole = _whole_object(path) if path.stat().st_size <= WHOLE_OBJECT_MAX else None
    if whole is not None and "gemini_json" in votes(whole.obj):
        return fmt, Counter(), whole, ""
    return fmt, Counter(), None, "no gemini_json object found: its lines kept as text"


def _detect(path: Path) -> tuple[str, Counter, WholeObject | None, str]:
    """(format, vote totals, the whole file as one object or None, why the vote's winner
    was not used or ''), from the first DETECT_LINES lines: the format of the first
    session start, else the vote's winner unless its events are too few."""
    counts: dict[str, int] = {}
    objects = []
    text = 0
    with open(path, "rb") as f:
        for i, line in enumerate(read_lines(f, counts)):
            if line.obj is not None:
                objects.append(line.obj)
            else:
                text += bool(line.body.strip())
            if i >= DETECT_LINES:
                break
    fmt, tally = detect(objects)
    started = first_session_start(objects)
    if started is not None:  # the CLI's own first line: what lines written later say cannot change it
        return started, tally, None, "" if started == fmt else f"{fmt} won the vote, {started} started the session"
    if fmt == "plain":
        whole = _whole_object(path) if path.stat().st_size <= WHOLE_OBJECT_MAX else None
        if whole is not None and "gemini_json" in votes(whole.obj):
            return "gemini_json", Counter(gemini_json=1), whole, ""
        return fmt, tally, None, ""
    explained = sum(explains(fmt, obj, RENDERERS[fmt].types) for obj in objects)
    if too_few_events(explained, len(objects) - explained + text):
        note = (
            f"{fmt} would explain only {explained} of {len(objects) + text} lines read "
            f"({len(objects) - explained} other JSON, {text} text): kept as plain text"
        )
        return "plain", tally, None, note
    return fmt, tally, None, ""


@dataclass(frozen=True)
class WholeObject:
    """One pretty-printed JSON object in a trace, and the lines it spans (0-based)."""

    obj: dict
    first: int
    last: int

    def is_text(self, index: int, body: bytes) -> bool:
        """Whether line index (its body after prefixes) holds something besides the object:
        a line around it, or text before its `{` or after its `}` on its own lines."""
        if not body.strip():
            return False
        if index < self.first or index > self.last:
            return True
        return (index == self.first and not body.lstrip().startswith(b"{")) or (
            index == self.last and not body.rstrip().endswith(b"}")
        )


def _whole_object(path: Path) -> WholeObject | None:
    """The file's first JSON object once line prefixes are stripped (pretty-printed output)."""
    with open(path, "rb") as f:
        text = b"\n".join(strip_prefixes(raw.rstrip(b"\r\n"))[1] for raw in f)
    start = text.find(b"{")
    if start < 0:
        return None
    rest = text[start:].decode("utf-8", "replace")
    try:
        obj, end = json.JSONDecoder().raw_decode(rest)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or json_too_deep(obj):
        return None
    first = text.count(b"\n", 0, start)
    return WholeObject(obj, first, first + rest.count("\n", 0, end))


def _header(stats: TraceStats, renderer: Renderer | None) -> list[str]:
    how = "declared by the agent" if stats.declared else "detected from content"
    out = [f"# trace format: {stats.format} ({how})"]
    if renderer is not None:
        for k, v in renderer.facts.items():
            out.append(f"# {k.replace('_', ' ')}: {v}")
        if renderer.events:
            out.append("# events: " + ", ".join(f"{k} {n}" for k, n in renderer.events.most_common()))
        out += [f"# {line}" for line in renderer.summary()]
    out.append(
        f"# lines: {stats.lines} read, {stats.rendered_events} events, {stats.noise_lines} non-JSON and "
        f"{stats.foreign_json_lines} foreign JSON kept as text, {stats.oversized_lines} oversized skipped"
    )
    out.append(
        f"# one line per event ([time] KIND: ...); a line that starts with '{TRANSCRIPT_CONTINUATION}' goes on "
        "with the line above; a TEXT line is a line of the trace that is no event, as read (control characters "
        "escaped)"
    )
    return [transcript_text(line) for line in out] + [""]


def parse_trace_file(
    raw: Path,
    parsed: Path,
    *,
    sanitized_raw: Path | None = None,
    sanitized_parsed: Path | None = None,
    secrets: dict[str, str] | None = None,
    raw_only: bool = False,
    declared: str | None = None,
) -> TraceStats:
    """Write the transcript (and sanitized companions when their paths are given), in
    the format declared (one of DECLARABLE), else the one detected.

    Unsanitized outputs get owner-only permissions; sanitized ones are world-readable.
    Every output is written to a temp file and renamed into place.
    """
    raw, parsed = Path(raw), Path(parsed)
    redact = Redactor(secrets or {})
    if raw_only:
        fmt, tally, whole, note = "plain", Counter(), None, ""
    elif declared is not None:
        if declared not in DECLARABLE:
            raise ValueError(f"trace format {declared!r} is not one of {', '.join(DECLARABLE)}")
        fmt, tally, whole, note = _declared(raw, declared)
    else:
        fmt, tally, whole, note = _detect(raw)
    stats = TraceStats(format="raw" if raw_only else fmt, declared=declared is not None, votes=dict(tally), note=note)
    tmp = {p: p.with_name(f".{p.name}.tmp") for p in (parsed, sanitized_raw, sanitized_parsed) if p is not None}
    body, body_s = parsed.with_name(f".{parsed.name}.body"), parsed.with_name(f".{parsed.name}.body_s")
    renderer = RENDERERS[fmt]() if fmt in RENDERERS else None
    # Big traces: the two redactions run in forked children beside the parse
    parallel = hasattr(os, "fork") and raw.stat().st_size >= PARALLEL_MIN
    sinks: list[RedactedFile] = []
    try:
        if sanitized_raw is not None:  # the sanitized raw trace: a redacted copy, read on its own
            sinks.append(RedactedFile(tmp[sanitized_raw], redact, source=raw, parallel=parallel))
        with open(raw, "rb") as src, open(body, "wb") as out_file:
            if sanitized_parsed is not None:
                sinks.append(RedactedFile(body_s, redact, parallel=parallel))
            out = BlockWriter(out_file, *sinks[-1:] if sanitized_parsed is not None else ())
            _render_lines(src, out, renderer, fmt, whole, stats)
            out.flush()
        for sink in sinks:
            stats.redactions.update(sink.close())
        header = "\n".join(_header(stats, renderer)) + "\n" if renderer is not None else ""
        _assemble(header, {parsed: body, sanitized_parsed: body_s}, tmp, redact, sanitized_parsed)
        stats.redactions.update(redact.hits)
        stats.usage = (renderer.tally if renderer is not None else TokenUsage()).record(stats.format)
        for final, t in tmp.items():
            os.chmod(t, 0o600 if final == parsed else 0o644)
            os.replace(t, final)
    finally:
        for sink in sinks:
            sink.abort()
        for p in (body, body_s, *tmp.values()):
            p.unlink(missing_ok=True)
    return stats


def _assemble(
    header: str, bodies: dict[Path | None, Path], tmp: dict[Path, Path], redact: Redactor, sanitized: Path | None
) -> None:
    """Each transcript's temp file: the header (known only now, it holds the totals), then
    its body, copied on disk."""
    for target, part in bodies.items():
        if target is None:
            continue
        with open(tmp[target], "wb") as dst, open(part, "rb") as src_part:
            data = header.encode()
            dst.write(redact(data) if target == sanitized else data)
            shutil.copyfileobj(src_part, dst, 1 << 20)


def _write(out: BlockWriter, texts: list[str], stamp: str = "") -> int:
    """Write one event's lines (each with the event's time prefix, its own lines after the
    first as continuation lines); returns how many event lines."""
    if texts:
        out.write(transcript_event(f"[{stamp}] " if stamp else "", texts))
    return len(texts)


def _as_text(line: Line) -> bytes:
    """A line that is no event of the format, as the transcript keeps it: `TEXT: ` and the
    line as read (the harness's time prefix put before the kind, as on event lines; its
    control characters escaped as transcript_text does), so a line forged to look like a
    transcript line stays marked as text, and no CR or ESC in it moves a reader's cursor."""
    raw, stamp = line.raw, line.stamp
    raw = transcript_line_bytes(raw)
    if not stamp:
        return b"TEXT: " + raw + b"\n"
    end = len(stamp) + 1  # where the harness's prefix `[stamp] ` closes, when it leads the line
    if raw[end : end + 2] == b"] " and raw[:1] == b"[" and raw[1:end] == stamp.encode():
        return raw[: end + 1] + b" TEXT: " + raw[end + 2 :] + b"\n"
    return b"[" + stamp.encode() + b"] TEXT: " + raw + b"\n"


def _render_whole(
    lines: Iterable[Line], out: BlockWriter, renderer: Renderer, whole: WholeObject, stats: TraceStats
) -> None:
    """One pretty-printed object rendered once, where it starts; the lines around it kept as text."""
    stats.rendered_events = 1
    for i, line in enumerate(lines):
        if i == whole.first:
            stats.transcript_lines += _write(out, renderer.render(whole.obj))
        if whole.is_text(i, line.body):
            stats.noise_lines += 1
            stats.transcript_lines += 1
            out.write(_as_text(line))


def _render_lines(
    src: BinaryIO, out: BlockWriter, renderer: Renderer | None, fmt: str, whole: WholeObject | None, stats: TraceStats
) -> None:
    """The transcript's body: every line of src rendered (or copied, for plain traces)."""
    counts: dict[str, int] = {}
    if renderer is None:  # plain or raw-only: the transcript is the trace itself
        for line in read_lines(src, counts, decode_json=False):
            out.write(line.raw + b"\n")
    elif whole is not None:
        _render_whole(read_lines(src, counts), out, renderer, whole, stats)
    else:
        _render_events(read_lines(src, counts), out, renderer, fmt, stats)
    if renderer is not None:
        stats.transcript_lines += _write(out, renderer.flush())
    stats.lines = counts.get("lines", 0)
    stats.oversized_lines = counts.get("oversized", 0)


def _render_events(lines: Iterable[Line], out: BlockWriter, renderer: Renderer, fmt: str, stats: TraceStats) -> None:
    """Every line that is an event of fmt rendered, wherever it lies; every other
    non-blank line (noise, foreign JSON) kept as text in its place."""
    render, types, held = renderer.render, renderer.types, renderer.held
    noise = foreign = rendered = written = 0
    for line in lines:
        obj = line.obj
        if obj is not None and explains(fmt, obj, types):
            rendered += 1
            written += _write(out, render(obj), line.stamp)
            continue
        if obj is None:
            if not line.body.strip():
                continue  # a blank line says nothing
            noise += 1
        else:
            foreign += 1
        if held:  # a streamed chunk held back goes first
            written += _write(out, renderer.flush(), line.stamp)
        written += 1
        out.write(_as_text(line))
    if held:  # the last chunk held back (the loop ran: it holds one), at the last line's time
        written += _write(out, renderer.flush(), line.stamp)
    stats.noise_lines, stats.foreign_json_lines = noise, foreign
    stats.rendered_events, stats.transcript_lines = rendered, stats.transcript_lines + written
