"""One streaming pass over a raw trace: transcript, sanitized raw and sanitized transcript.

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
from ptb_harness.traces.detect import detect, explains, explains_too_little, votes
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
            f"{self.noise_lines} non-JSON lines and {self.foreign_json_lines} foreign JSON lines skipped"
            + (f", {self.oversized_lines} oversized lines skipped" if self.oversized_lines else "")
            + f", {red} secret occurrence(s) redacted"
            + (f"; {self.note}" if self.note else "")
        )


def _detect(path: Path) -> tuple[str, Counter, dict | None, str]:
    """(format, vote totals, the whole file as one object or None, why the vote's winner
    was not used or ''), from the first DETECT_LINES lines."""
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
    if fmt == "plain":
        whole = _whole_object(path) if path.stat().st_size <= WHOLE_OBJECT_MAX else None
        if whole is not None and "gemini_json" in votes(whole):
            return "gemini_json", Counter(gemini_json=1), whole, ""
        return fmt, tally, None, ""
    explained = sum(explains(fmt, obj, RENDERERS[fmt].types) for obj in objects)
    if explains_too_little(explained, len(objects) - explained, text):
        note = (
            f"{fmt} would explain only {explained} of {len(objects) + text} lines read "
            f"({len(objects) - explained} other JSON, {text} text): kept as plain text"
        )
        return "plain", tally, None, note
    return fmt, tally, None, ""


def _whole_object(path: Path) -> dict | None:
    """The file as one JSON object once line prefixes are stripped (pretty-printed output)."""
    with open(path, "rb") as f:
        text = b"\n".join(strip_prefixes(raw.rstrip(b"\r\n"))[1] for raw in f)
    start = text.find(b"{")
    if start < 0:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(text[start:].decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) and not json_too_deep(obj) else None


def _header(stats: TraceStats, renderer: Renderer | None) -> list[str]:
    out = [f"# trace format: {stats.format} (detected from content)"]
    if renderer is not None:
        for k, v in renderer.facts.items():
            out.append(f"# {k.replace('_', ' ')}: {v}")
        if renderer.events:
            out.append("# events: " + ", ".join(f"{k} {n}" for k, n in renderer.events.most_common()))
        out += [f"# {line}" for line in renderer.summary()]
    out.append(
        f"# lines: {stats.lines} read, {stats.noise_lines} non-JSON skipped, "
        f"{stats.foreign_json_lines} foreign JSON skipped, {stats.oversized_lines} oversized skipped"
    )
    return out + [""]


def parse_trace_file(
    raw: Path,
    parsed: Path,
    *,
    sanitized_raw: Path | None = None,
    sanitized_parsed: Path | None = None,
    secrets: dict[str, str] | None = None,
    raw_only: bool = False,
) -> TraceStats:
    """Write the transcript (and sanitized companions when their paths are given).

    Unsanitized outputs get owner-only permissions; sanitized ones are world-readable.
    Every output is written to a temp file and renamed into place.
    """
    raw, parsed = Path(raw), Path(parsed)
    redact = Redactor(secrets or {})
    fmt, tally, whole, note = ("plain", Counter(), None, "") if raw_only else _detect(raw)
    stats = TraceStats(format="raw" if raw_only else fmt, votes=dict(tally), note=note)
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
    """Write one event's lines (all with the event's time prefix); returns how many."""
    if texts:
        # one join per event: a per-line f-string copied every line twice
        prefix = f"[{stamp}] " if stamp else ""
        out.write((prefix + f"\n{prefix}".join(texts) + "\n").encode("utf-8", "replace"))
    return len(texts)


def _render_lines(
    src: BinaryIO, out: BlockWriter, renderer: Renderer | None, fmt: str, whole: dict | None, stats: TraceStats
) -> None:
    """The transcript's body: every line of src rendered (or copied, for plain traces)."""
    counts: dict[str, int] = {}
    if renderer is None:  # plain or raw-only: the transcript is the trace itself
        for line in read_lines(src, counts, decode_json=False):
            out.write(line.raw + b"\n")
    elif whole is not None:  # one pretty-printed object: rendered once, the lines only counted
        stats.rendered_events = 1
        stats.transcript_lines += _write(out, renderer.render(whole))
        for _ in read_lines(src, counts, decode_json=False):
            pass
    else:
        _render_events(read_lines(src, counts), out, renderer, fmt, stats)
    if renderer is not None:
        stats.transcript_lines += _write(out, renderer.flush())
    stats.lines = counts.get("lines", 0)
    stats.oversized_lines = counts.get("oversized", 0)


def _render_events(lines: Iterable[Line], out: BlockWriter, renderer: Renderer, fmt: str, stats: TraceStats) -> None:
    """Every line that is an event of fmt rendered; noise and foreign JSON only counted."""
    render, types = renderer.render, renderer.types
    noise = foreign = rendered = written = 0
    for line in lines:
        obj = line.obj
        if obj is None:
            noise += bool(line.body.strip())
        elif not explains(fmt, obj, types):
            foreign += 1
        else:
            rendered += 1
            written += _write(out, render(obj), line.stamp)
    stats.noise_lines, stats.foreign_json_lines = noise, foreign
    stats.rendered_events, stats.transcript_lines = rendered, stats.transcript_lines + written
