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
from dataclasses import dataclass, field
from pathlib import Path

from ptb_harness.traces.detect import detect, votes
from ptb_harness.traces.formats import RENDERERS, Renderer
from ptb_harness.traces.lines import read_lines, strip_prefixes
from ptb_harness.traces.redact import BlockWriter, Redactor

#: How many lines detection reads (a format shows itself long before).
DETECT_LINES = 5000
#: A file this small with no JSON line may be one pretty-printed object (gemini --output-format json).
WHOLE_OBJECT_MAX = 64 * 2**20


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

    def summary(self) -> str:
        red = sum(self.redactions.values())
        return (
            f"{self.format} trace: {self.lines} lines, {self.rendered_events} events rendered, "
            f"{self.noise_lines} non-JSON lines and {self.foreign_json_lines} foreign JSON lines skipped"
            + (f", {self.oversized_lines} oversized lines skipped" if self.oversized_lines else "")
            + f", {red} secret occurrence(s) redacted"
        )


def _detect(path: Path) -> tuple[str, Counter, dict | None]:
    counts: dict[str, int] = {}
    objects = []
    with open(path, "rb") as f:
        for i, line in enumerate(read_lines(f, counts)):
            if line.obj is not None:
                objects.append(line.obj)
            if i >= DETECT_LINES:
                break
    fmt, tally = detect(objects)
    if fmt == "plain" and path.stat().st_size <= WHOLE_OBJECT_MAX:
        whole = _whole_object(path)
        if whole is not None and "gemini_json" in votes(whole):
            return "gemini_json", Counter(gemini_json=1), whole
    return fmt, tally, None


def _whole_object(path: Path) -> dict | None:
    """The file as one JSON object once line prefixes are stripped (pretty-printed output)."""
    with open(path, "rb") as f:
        text = b"\n".join(strip_prefixes(raw.rstrip(b"\r\n"))[1] for raw in f)
    start = text.find(b"{")
    if start < 0:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(text[start:].decode("utf-8", "replace"))
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


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
    fmt, tally, whole = ("plain", Counter(), None) if raw_only else _detect(raw)
    stats = TraceStats(format="raw" if raw_only else fmt, votes=dict(tally))
    tmp = {p: p.with_name(f".{p.name}.tmp") for p in (parsed, sanitized_raw, sanitized_parsed) if p is not None}
    body, body_s = parsed.with_name(f".{parsed.name}.body"), parsed.with_name(f".{parsed.name}.body_s")
    renderer = RENDERERS[fmt]() if fmt in RENDERERS else None
    try:
        with (
            open(raw, "rb") as src,
            open(body, "wb") as out_file,
            open(body_s, "wb") as out_s_file,
            open(tmp[sanitized_raw], "wb") if sanitized_raw else open(os.devnull, "wb") as raw_s_file,
        ):
            out = BlockWriter(out_file, out_s_file, redact)  # the transcript, and its sanitized copy
            raw_s = BlockWriter(None, raw_s_file, redact)  # the sanitized raw trace
            counts: dict[str, int] = {}
            if whole is not None and renderer is not None:
                stats.rendered_events = 1
                for text in renderer.render(whole, ""):
                    out.write(text.encode("utf-8", "replace") + b"\n")
                    stats.transcript_lines += 1
            render = renderer.render if renderer is not None else None
            types = renderer.types if renderer is not None else frozenset()
            for line in read_lines(src, counts):
                raw_s.write(line.raw + b"\n")
                if render is None:  # plain or raw-only: the transcript is the trace itself
                    out.write(line.raw + b"\n")
                    continue
                obj = line.obj
                if whole is not None:
                    continue
                if obj is None:
                    stats.noise_lines += bool(line.body.strip())
                    continue
                v = votes(obj)
                if (v and fmt not in v) or (not v and obj.get("type") not in types):
                    stats.foreign_json_lines += 1
                    continue
                stats.rendered_events += 1
                texts = render(obj, line.stamp)
                if texts:
                    prefix = f"[{line.stamp}] " if line.stamp else ""
                    out.write("".join(f"{prefix}{t}\n" for t in texts).encode("utf-8", "replace"))
                    stats.transcript_lines += len(texts)
            if renderer is not None and hasattr(renderer, "flush"):
                for text in renderer.flush():
                    out.write(text.encode("utf-8", "replace") + b"\n")
            out.flush()
            raw_s.flush()
            stats.lines = counts.get("lines", 0)
            stats.oversized_lines = counts.get("oversized", 0)
        header = "\n".join(_header(stats, renderer)) + "\n" if renderer is not None else ""
        for target, part in ((parsed, body), (sanitized_parsed, body_s)):
            if target is None:
                continue
            with open(tmp[target], "wb") as dst, open(part, "rb") as src_part:
                data = header.encode()
                dst.write(redact(data) if target is sanitized_parsed else data)
                shutil.copyfileobj(src_part, dst, 1 << 20)
        stats.redactions = redact.hits
        os.chmod(tmp[parsed], 0o600)
        for p in (sanitized_raw, sanitized_parsed):
            if p is not None:
                os.chmod(tmp[p], 0o644)
        for final, t in tmp.items():
            os.replace(t, final)
    finally:
        for p in (body, body_s, *tmp.values()):
            p.unlink(missing_ok=True)
    return stats
