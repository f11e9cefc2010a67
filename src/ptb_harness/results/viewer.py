"""The campaign viewer: a static site (no server) written by collect, that opens from disk
and from a shared filesystem through any web server.

- ``index.html``: the status grid (a row per agent and model, a column per task, one mark
  per cell linking to the cell's page), the counts, and every cell without a score.
- ``cells/<slug>.html``: the cell's outcome and evidence, a link to its transcript and,
  beside it, the model calls of its LLM gateway's llm_log.jsonl (its first calls: a long
  session's log is hundreds of MB), its GPU use, the final evaluation's seeds (each seed's
  values, the seeds left out and why), its records (solve, evaluate, metrics, usage,
  judgement, provenance).
- ``transcripts/<slug>/``: the sanitized transcript as numbered chunks of ~256 KiB and a
  pager with search (see ``viewer_assets``): a 500 MB transcript never loads whole.

Regeneration is incremental: a cell's page is rewritten only when its outcome or the
size or mtime of one of its records changed, and its transcript chunks only when the
transcript changed; ``.stamps.json`` keeps the signatures.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import stat
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptb_harness.core.cell_files import EVALUATE, LLM_LOG, METRICS, OPEN_RECORDS, RECORDS, TRANSCRIPT_SANITIZED
from ptb_harness.core.records import atomic_write_text, loads_bounded, read_record_bytes, read_record_head
from ptb_harness.results.outcome import MARKS, marks_legend

#: the stylesheet and the transcript pager (a script: see its header)
ASSETS = Path(__file__).parent / "assets"
#: a record larger than this is linked, not inlined (hand-edited or hostile records)
MAX_INLINE_BYTES = 256 * 1024
CHUNK_BYTES = 256 * 1024
#: what a cell's page shows of llm_log.jsonl: its first calls, each body cut
LLM_LOG_SHOWN_BYTES = 4 * 2**20
LLM_LOG_SHOWN_CALLS = 500
LLM_BODY_SHOWN = 2000
_STAMPS_VERSION = 1


@dataclass(frozen=True)
class ViewerCell:
    """What the viewer needs of one cell (a row of the cell table)."""

    slug: str
    agent: str
    task: str
    model: str
    hours: str
    num_gpus: int
    run: int
    outcome: str
    evidence: str
    cell_dir: Path

    @property
    def label(self) -> str:
        return f"{self.hours}h, {self.num_gpus} GPU, run {self.run}"


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, body: str, depth: int) -> str:
    up = "../" * depth
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_esc(title)}</title>"
        f"<link rel='stylesheet' href='{up}viewer.css'></head><body>{body}</body></html>\n"
    )


def _signature(cell: ViewerCell, names: Iterable[str]) -> list:
    sig: list = [cell.outcome, cell.evidence]
    for name in names:
        try:
            st = (cell.cell_dir / name).stat()
            sig.append([name, st.st_size, st.st_mtime_ns])
        except OSError:
            sig.append([name, None])
    return sig


def _record_html(cell_dir: Path, name: str) -> str | None:
    path = cell_dir / name
    # no link followed, no device read, bounded: a record may have been forged or replaced
    data, why = read_record_bytes(path, MAX_INLINE_BYTES)
    if data is None:
        return f"<p class='muted'>{_esc(name)}: {_esc(why)}, not shown ({_esc(path)})</p>" if why else None
    text = data.decode("utf-8", "replace")
    # a record that is not valid JSON is shown as it is: a broken record is evidence too
    obj, problem = loads_bounded(data)
    if not problem:
        text = json.dumps(obj, indent=1)
    open_ = " open" if name in OPEN_RECORDS else ""
    return f"<details{open_}><summary>{_esc(name)}</summary><pre>{_esc(text)}</pre></details>"


#: a call's columns on the page: (header, the log line's value)
_LLM_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("n", lambda c, u: c.get("n")),
    ("time", lambda c, u: c.get("time")),
    ("model", lambda c, u: c.get("model")),
    ("status", lambda c, u: c.get("status")),
    ("input", lambda c, u: u.get("input_tokens")),
    ("cached", lambda c, u: u.get("cached_tokens")),
    ("output", lambda c, u: u.get("output_tokens")),
    ("cost (USD)", lambda c, u: c.get("cost_usd")),
    ("ms", lambda c, u: c.get("latency_ms")),
    ("refused / error", lambda c, u: c.get("refused") or c.get("error")),
)


def _llm_call_row(line: bytes) -> str:
    call, _ = loads_bounded(line)
    if not isinstance(call, dict):
        text = _esc(line[:200].decode("utf-8", "replace"))
        return f"<tr><td colspan='{len(_LLM_COLUMNS) + 1}'>not a call: {text}</td></tr>"
    u = call.get("usage") if isinstance(call.get("usage"), dict) else {}
    cells = "".join(f"<td>{_esc('' if get(call, u) is None else get(call, u))}</td>" for _, get in _LLM_COLUMNS)
    bodies = []
    for side in ("request", "response"):
        part = call.get(side) if isinstance(call.get(side), dict) else {}
        body = str(part.get("body") or "")
        cut = f" (first {LLM_BODY_SHOWN} of {len(body)} characters)" if len(body) > LLM_BODY_SHOWN else ""
        bodies.append(f"<p>{side}{_esc(cut)}</p><pre>{_esc(body[:LLM_BODY_SHOWN])}</pre>")
    return f"<tr>{cells}<td><details><summary>bodies</summary>{''.join(bodies)}</details></td></tr>"


def _llm_log_html(cell_dir: Path) -> str | None:
    """The cell's model calls from its llm_log.jsonl (written by its gateway, holding the
    agent's text: read bounded, link-safe, every value escaped), or None without a log."""
    data, why, size = read_record_head(cell_dir / LLM_LOG, LLM_LOG_SHOWN_BYTES)
    if data is None:
        return f"<p class='muted'>{LLM_LOG}: {_esc(why)}, not shown</p>" if why else None
    lines = [ln for ln in data.split(b"\n")[: None if size == len(data) else -1] if ln.strip()]
    rows = [_llm_call_row(ln) for ln in lines[:LLM_LOG_SHOWN_CALLS]]
    head = "".join(f"<th>{_esc(h)}</th>" for h, _ in _LLM_COLUMNS) + "<th></th>"
    shown = f"{len(rows)} calls" + (f" of the first {len(data)} of {size} bytes" if size > len(data) else "")
    if len(lines) > len(rows):
        shown += f" (the first {len(rows)} of {len(lines)} read)"
    return (
        f"<h2>LLM calls (gateway)</h2><p class='muted'>{_esc(LLM_LOG)}: {_esc(shown)}; the whole log: "
        f"<code>{_esc(cell_dir / LLM_LOG)}</code></p><table id='llm-calls'><tr>{head}</tr>{''.join(rows)}</table>"
    )


def _record_object(path: Path) -> dict[str, Any]:
    """A record as a JSON object, read bounded and link-safe ({} when it is not one)."""
    data, _ = read_record_bytes(path, MAX_INLINE_BYTES * 4)
    obj, problem = loads_bounded(data) if data is not None else (None, "unread")
    return obj if not problem and isinstance(obj, dict) else {}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


#: a seed's columns: (header, its value from (its per_seed entry's metrics, its outcome))
_SEED_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("status", lambda m, o: o.get("status") or ("scored" if m else "")),
    ("stage", lambda m, o: o.get("max_tokens_stage")),
    ("accuracy", lambda m, o: m.get("accuracy")),
    ("stderr", lambda m, o: m.get("stderr")),
    ("n_examples", lambda m, o: m.get("n_examples")),
    ("max_tokens", lambda m, o: m.get("max_tokens") or m.get("max_new_tokens")),
    ("problem", lambda m, o: o.get("problem")),
)


def _seeds_html(cell_dir: Path) -> str | None:
    """The final evaluation's seeds: each seed's values (metrics.json's per_seed) and
    outcome (evaluate.json's seeds: the seeds left out of the mean, and why), or None for
    a cell scored without seeds."""
    metrics, seeds = _record_object(cell_dir / METRICS), _mapping(_record_object(cell_dir / EVALUATE).get("seeds"))
    per_seed, outcomes = _mapping(metrics.get("per_seed")), _mapping(seeds.get("outcomes"))
    if not per_seed and not outcomes:
        return None
    evaluated = seeds.get("evaluated") if isinstance(seeds.get("evaluated"), list) else []
    order = [str(s) for s in evaluated] + list(outcomes) + list(per_seed)  # the seeds' order, then any other
    rows = []
    for seed in dict.fromkeys(order):
        m, o = _mapping(_mapping(per_seed.get(seed)).get("metrics")), _mapping(outcomes.get(seed))
        values = [get(m, o) for _, get in _SEED_COLUMNS]
        rows.append(f"<tr><td>{_esc(seed)}</td>" + "".join(f"<td>{_esc('' if v is None else v)}</td>" for v in values))
    head = "<th>seed</th>" + "".join(f"<th>{h}</th>" for h, _ in _SEED_COLUMNS)
    score = (
        f"the cell's score: accuracy {_esc(metrics.get('accuracy'))}, the mean over "
        f"{_esc(metrics.get('num_seeds_succeeded'))} of {_esc(metrics.get('num_seeds'))} seeds"
        if "num_seeds" in metrics
        else "no score: the first seed never scored"
    )
    decoding = f"temperature {_esc(seeds.get('temperature'))}, greedy {_esc(seeds.get('greedy'))}"
    return (
        f"<h2>Seeds</h2><p>{score}; seed policy {_esc(seeds.get('policy'))}, {decoding}</p>"
        f"<table id='seeds'><tr>{head}</tr>{''.join(rows)}</table>"
    )


def _gpu_html(cell: ViewerCell, usage: list[dict], plots_dir: Path | None, page_dir: Path) -> str:
    parts = ["<h2>GPU</h2>"]
    if usage:
        cols = ["stage", "gpus", "gpu_hours", "util_mean", "util_median", "idle_fraction", "mem_peak_gib"]
        parts.append("<table><tr>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr>")
        for u in usage:
            parts.append("<tr>" + "".join(f"<td>{_esc('' if u.get(c) is None else u.get(c))}</td>" for c in cols))
        parts.append("</table>")
    png = plots_dir / f"{cell.slug}.png" if plots_dir else None
    if png is not None and png.is_file():
        rel = os.path.relpath(png, page_dir)
        parts.append(f"<p><img alt='GPU use over time' src='{_esc(Path(rel).as_posix())}'></p>")
    elif usage:
        parts.append(
            f"<p class='muted'>The plot over time: <code>ptb-harness plot-cell {_esc(cell.cell_dir)}</code></p>"
        )
    else:
        parts.append("<p class='muted'>no GPU monitor for this cell</p>")
    return "".join(parts)


def cell_page(cell: ViewerCell, usage: list[dict], plots_dir: Path | None, has_transcript: bool, page_dir: Path) -> str:
    body = [
        "<p><a href='../index.html'>&larr; campaign</a></p>",
        f"<h1>{_esc(cell.agent)} / {_esc(cell.task)} / {_esc(cell.model)} ({_esc(cell.label)})</h1>",
        f"<p>outcome: <span class='outcome' id='outcome'>{_esc(cell.outcome)}</span></p>",
        f"<div class='evidence' id='evidence'>{_esc(cell.evidence)}</div>",
        f"<p class='muted'>cell dir: <code>{_esc(cell.cell_dir)}</code></p>",
    ]
    if has_transcript:
        body.append(f"<p><a id='transcript' href='../transcripts/{_esc(cell.slug)}/index.html'>transcript</a></p>")
    else:
        body.append("<p class='muted'>no transcript yet</p>")
    body.append(_llm_log_html(cell.cell_dir) or "")
    body.append(_seeds_html(cell.cell_dir) or "")
    body.append(_gpu_html(cell, usage, plots_dir, page_dir))
    body.append("<h2>Records</h2>")
    for name in RECORDS:
        shown = _record_html(cell.cell_dir, name)
        if shown:
            body.append(shown)
    return _page(f"{cell.agent} {cell.task} {cell.model}", "".join(body), 1)


def _transcript_page(cell: ViewerCell, chunks: int, size: int) -> str:
    meta = json.dumps({"chunks": chunks, "bytes": size})
    body = (
        f"<p><a href='../../cells/{_esc(cell.slug)}.html'>&larr; cell</a></p>"
        f"<h1>Transcript: {_esc(cell.agent)} / {_esc(cell.task)} / {_esc(cell.model)} ({_esc(cell.label)})</h1>"
        "<p class='muted' id='size'></p>"
        "<div class='bar'><button id='prev'>&larr; prev</button> <input id='page' size='5'> "
        "<span id='where'></span> <button id='next'>next &rarr;</button> &nbsp; "
        "<input id='q' placeholder='search the whole transcript'> <button id='go'>search</button> "
        "<button id='stop'>stop</button> <span id='status'></span></div>"
        "<ol id='hits'></ol><div id='text'></div>"
        f"<script>window.PTB_META = {meta};</script><script src='../../transcript.js'></script>"
    )
    return _page(f"transcript {cell.slug}", body, 2)


def write_transcript(src: Path, out: Path) -> tuple[int, int]:
    """Split src into chunk scripts of ~CHUNK_BYTES, cut at line ends (a line longer than
    a chunk is cut where it must be). Returns (chunks, bytes). Streams: memory stays at
    one chunk whatever the size of src."""
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    n = total = 0
    # link-safe and regular files only (see write_viewer): never a link to /dev/zero
    with os.fdopen(os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
        buf, eof = b"", False
        while True:
            while not eof and len(buf) < CHUNK_BYTES:
                block = f.read(CHUNK_BYTES)
                eof = not block
                buf += block
            if not buf:
                break
            cut = len(buf) if eof and len(buf) <= CHUNK_BYTES else buf.rfind(b"\n", 0, CHUNK_BYTES) + 1
            piece, buf = buf[: cut or CHUNK_BYTES], buf[cut or CHUNK_BYTES :]
            # a script body may not contain "</script"
            js = json.dumps(piece.decode("utf-8", "replace")).replace("</", "<\\/")
            (tmp / f"c{n:05d}.js").write_text(f"ptbChunk({n},{js});\n")
            n += 1
            total += len(piece)
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return n, total


def grid_page(title: str, cells: list[ViewerCell], flagged: set[str]) -> str:
    tasks = sorted({c.task for c in cells})
    rows: dict[tuple[str, str], dict[str, list[ViewerCell]]] = defaultdict(lambda: defaultdict(list))
    for c in cells:
        rows[(c.agent, c.model)][c.task].append(c)
    counts: dict[str, int] = defaultdict(int)
    for c in cells:
        counts[c.outcome] += 1
    body = [
        f"<h1>{_esc(title)}</h1>",
        "<p>" + ", ".join(f"{counts.get(k, 0)} {k}" for k in MARKS) + f" ({len(cells)} cells)</p>",
        f"<p class='muted'>marks: {_esc(marks_legend())}; "
        "one per cell (hours, GPUs, repeat); click one for the cell; a red outline is a judge flag</p>",
        "<table class='grid' id='grid'><tr><th>agent / model</th>"
        + "".join(f"<th>{_esc(t)}</th>" for t in tasks)
        + "</tr>",
    ]
    for (agent, model), by_task in sorted(rows.items()):
        tds = []
        for t in tasks:
            marks = []
            for c in sorted(by_task.get(t, []), key=lambda c: (float(c.hours), c.num_gpus, c.run)):
                cls = f"m {c.outcome}" + (" flagged" if c.slug in flagged else "")
                tip = f"{c.label}: {c.outcome}" + (f": {c.evidence}" if c.evidence else "")
                marks.append(
                    f"<a class='{cls}' href='cells/{_esc(c.slug)}.html' title='{_esc(tip[:300])}'"
                    f" data-outcome='{c.outcome}'>{MARKS.get(c.outcome, '?')}</a>"
                )
            tds.append("<td>" + "".join(marks) + "</td>")
        body.append(f"<tr><td>{_esc(agent)} / {_esc(model)}</td>{''.join(tds)}</tr>")
    body.append("</table>")
    listed = [c for c in cells if c.outcome in ("agent_failed", "infra_failed", "running")]
    if listed:
        body.append(f"<h2>Cells without a score ({len(listed)}, pending cells not listed)</h2><table id='unscored'>")
        body.append("<tr><th>cell</th><th>outcome</th><th>evidence</th></tr>")
        for c in listed[:2000]:
            body.append(
                f"<tr><td><a href='cells/{_esc(c.slug)}.html'>{_esc(c.agent)} / {_esc(c.task)} / {_esc(c.model)}"
                f" ({_esc(c.label)})</a></td><td>{_esc(c.outcome)}</td><td>{_esc(c.evidence[:500])}</td></tr>"
            )
        body.append("</table>")
        if len(listed) > 2000:
            body.append(f"<p>... and {len(listed) - 2000} more (see tables/cells.csv)</p>")
    return _page(title, "".join(body), 0)


@dataclass
class ViewerStats:
    cells: int = 0
    pages_written: int = 0
    transcripts_written: int = 0


def write_viewer(
    out: Path,
    title: str,
    cells: list[ViewerCell],
    usage_by_cell: Mapping[str, list[dict]] | None = None,
    plots_dir: Path | None = None,
    flagged: set[str] | None = None,
) -> ViewerStats:
    """Write (or bring up to date) the viewer under out; returns what was rewritten."""
    usage_by_cell = usage_by_cell or {}
    flagged = flagged or set()
    stats = ViewerStats(cells=len(cells))
    (out / "cells").mkdir(parents=True, exist_ok=True)
    (out / "transcripts").mkdir(exist_ok=True)
    for name in ("viewer.css", "transcript.js"):
        text = (ASSETS / name).read_text()
        if not (out / name).is_file() or (out / name).read_text() != text:
            atomic_write_text(out / name, text)
    stamps_path = out / ".stamps.json"
    try:
        stamps = json.loads(stamps_path.read_text())
        if stamps.get("version") != _STAMPS_VERSION:
            stamps = {}
    except (OSError, ValueError, AttributeError):
        stamps = {}
    pages, transcripts = stamps.get("pages", {}), stamps.get("transcripts", {})
    gpu_png_dir = plots_dir
    for c in cells:
        usage = usage_by_cell.get(str(c.cell_dir), [])
        png = gpu_png_dir / f"{c.slug}.png" if gpu_png_dir else None
        png_sig = png.stat().st_mtime_ns if png is not None and png.is_file() else None
        src = c.cell_dir / TRANSCRIPT_SANITIZED
        try:
            st = src.lstat()
            t_sig = [st.st_size, st.st_mtime_ns] if stat.S_ISREG(st.st_mode) else None
        except OSError:
            t_sig = None
        if t_sig is not None and transcripts.get(c.slug) != t_sig:
            write_transcript(src, out / "transcripts" / c.slug)
            chunks, size = _chunk_count(out / "transcripts" / c.slug), t_sig[0]
            atomic_write_text(out / "transcripts" / c.slug / "index.html", _transcript_page(c, chunks, size))
            transcripts[c.slug] = t_sig
            stats.transcripts_written += 1
        elif t_sig is None and c.slug in transcripts:
            shutil.rmtree(out / "transcripts" / c.slug, ignore_errors=True)
            transcripts.pop(c.slug)
        sig = [*_signature(c, (*RECORDS, LLM_LOG)), t_sig, png_sig, usage]
        page = out / "cells" / f"{c.slug}.html"
        if pages.get(c.slug) != sig or not page.is_file():
            atomic_write_text(page, cell_page(c, usage, gpu_png_dir, t_sig is not None, page.parent))
            pages[c.slug] = sig
            stats.pages_written += 1
    atomic_write_text(out / "index.html", grid_page(title, cells, flagged))
    atomic_write_text(stamps_path, json.dumps({"version": _STAMPS_VERSION, "pages": pages, "transcripts": transcripts}))
    return stats


def _chunk_count(directory: Path) -> int:
    return sum(1 for p in directory.glob("c*.js"))
