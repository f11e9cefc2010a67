"""The campaign viewer's pages and transcript chunks (the browser test is in
tests/workflow/test_viewer_browser.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ptb_harness.results import viewer
from ptb_harness.results.viewer import ViewerCell, write_transcript, write_viewer


def chunk_texts(directory: Path) -> list[str]:
    texts = []
    for path in sorted(directory.glob("c*.js")):
        m = re.fullmatch(r"ptbChunk\((\d+),(.*)\);\n", path.read_text(), re.S)
        assert m and int(m.group(1)) == len(texts), path
        texts.append(json.loads(m.group(2).replace("<\\/", "</")))
    return texts


def test_transcript_chunks_cut_at_line_ends_and_rebuild_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(viewer, "CHUNK_BYTES", 64)
    lines = [f"line {i} </script> é\n" for i in range(40)] + ["x" * 200 + "\n", "last line without newline"]
    src = tmp_path / "t.txt"
    src.write_text("".join(lines))
    chunks, size = write_transcript(src, tmp_path / "out")
    texts = chunk_texts(tmp_path / "out")
    assert len(texts) == chunks and size == src.stat().st_size
    assert "".join(texts) == src.read_text()
    # every chunk but the long line's pieces and the last ends at a line end
    assert all(t.endswith("\n") for t in texts[:-1] if "x" not in t)
    assert all(len(t.encode()) <= 64 for t in texts)
    # a script body never closes its tag early
    assert all("</script" not in p.read_text() for p in (tmp_path / "out").glob("c*.js"))


def test_empty_transcript(tmp_path):
    (tmp_path / "t.txt").write_text("")
    assert write_transcript(tmp_path / "t.txt", tmp_path / "out") == (0, 0)


def make_cell(root: Path, agent: str, outcome: str, evidence: str, transcript: str | None) -> ViewerCell:
    d = root / "cells" / agent
    d.mkdir(parents=True)
    (d / "solve.json").write_text(json.dumps({"status": "exited", "exit_code": 3}))
    if transcript is not None:
        (d / "solve_parsed_sanitized.txt").write_text(transcript)
    return ViewerCell(f"{agent}.t.m.1h-0gpu-run1", agent, "t", "m", "1", 0, 1, outcome, evidence, d)


def test_pages_are_escaped_linked_and_incremental(tmp_path):
    cells = [
        make_cell(tmp_path, "good", "scored", "", "USER: hi\n"),
        make_cell(tmp_path, "bad", "agent_failed", "agent exited with code 3 <script>alert(1)</script>", None),
    ]
    out = tmp_path / "viewer"
    stats = write_viewer(out, "campaign c", cells)
    assert (stats.pages_written, stats.transcripts_written) == (2, 1)
    index = (out / "index.html").read_text()
    assert "href='cells/bad.t.m.1h-0gpu-run1.html'" in index and "data-outcome='agent_failed'" in index
    assert "<script>alert" not in index and "&lt;script&gt;alert(1)" in index
    page = (out / "cells" / "bad.t.m.1h-0gpu-run1.html").read_text()
    assert "agent exited with code 3 &lt;script&gt;" in page and "no transcript yet" in page
    assert "&quot;exit_code&quot;: 3" in page
    good = (out / "cells" / "good.t.m.1h-0gpu-run1.html").read_text()
    assert "../transcripts/good.t.m.1h-0gpu-run1/index.html" in good
    assert (out / "transcripts" / "good.t.m.1h-0gpu-run1" / "c00000.js").is_file()
    # nothing changed: nothing rewritten but the grid
    again = write_viewer(out, "campaign c", cells)
    assert (again.pages_written, again.transcripts_written) == (0, 0)
    # one record changes: that cell's page only
    (cells[1].cell_dir / "evaluate.json").write_text("{}")
    third = write_viewer(out, "campaign c", cells)
    assert (third.pages_written, third.transcripts_written) == (1, 0)
    # an outcome changes without a file changing (a running job died): its page again
    died = [cells[0], ViewerCell(**{**cells[1].__dict__, "outcome": "infra_failed"})]
    assert write_viewer(out, "campaign c", died).pages_written == 1


def test_large_or_broken_records_are_not_inlined(tmp_path, monkeypatch):
    cell = make_cell(tmp_path, "a", "infra_failed", "records disagree", None)
    (cell.cell_dir / "metrics.json").write_text("[" * 5000)
    (cell.cell_dir / "evaluate.json").write_text(" " * (viewer.MAX_INLINE_BYTES + 1))
    write_viewer(tmp_path / "v", "c", [cell])
    page = (tmp_path / "v" / "cells" / f"{cell.slug}.html").read_text()
    assert "[[[[" in page  # shown as it is
    assert "more than the 262144 it may have, not shown" in page


def test_links_in_a_cell_are_never_followed(tmp_path):
    cell = make_cell(tmp_path, "a", "scored", "", None)
    secret = tmp_path / "host-secret.txt"
    secret.write_text("HOST SECRET")
    (cell.cell_dir / "metrics.json").symlink_to(secret)
    (cell.cell_dir / "solve_parsed_sanitized.txt").symlink_to("/dev/zero")
    stats = write_viewer(tmp_path / "v", "c", [cell])
    page = (tmp_path / "v" / "cells" / f"{cell.slug}.html").read_text()
    assert "HOST SECRET" not in page and "metrics.json: cannot be read" in page
    assert stats.transcripts_written == 0 and "no transcript yet" in page


def test_flagged_cells_are_marked_in_the_grid(tmp_path):
    import pandas as pd

    from ptb_harness.core.layout import collect_outputs
    from ptb_harness.results.campaign_views import write_views

    rows = []
    for agent, flagged in (("clean", False), ("cheat", True)):
        d = tmp_path / "cells" / agent
        d.mkdir(parents=True)
        rows.append(
            {"agent": agent, "task": "t", "model": "m", "hours": "1", "num_gpus": 0, "run": 1, "outcome": "scored"}
            | {"evidence": "", "cell_dir": str(d), "flagged": flagged}
        )
    results = tmp_path / "results"
    write_views(pd.DataFrame(rows), collect_outputs(results), results, "c")
    index = (results / "viewer" / "index.html").read_text()
    assert "class='m scored flagged' href='cells/cheat.t.m.1h-0gpu-run1.html'" in index
    assert "class='m scored' href='cells/clean.t.m.1h-0gpu-run1.html'" in index


def test_the_llm_log_is_shown_beside_the_transcript_bounded_and_escaped(tmp_path, monkeypatch):
    cell = make_cell(tmp_path, "a", "scored", "", "USER: hi\n")
    call = {
        "n": 1, "time": "2026-01-01T00:00:00.000Z", "model": "m<b>", "status": 200, "latency_ms": 12.5,
        "usage": {"input_tokens": 1200, "output_tokens": 40, "cached_tokens": 300}, "cost_usd": 0.0042,
        "refused": None, "error": None,
        "request": {"body": '{"messages": "<script>alert(1)</script>' + "x" * 5000 + '"}'},
        "response": {"body": "ok"},
    }  # fmt: skip
    lines = [json.dumps(call), "not json <img src=x>", json.dumps({**call, "n": 2, "refused": "llm_budget"})]
    (cell.cell_dir / "llm_log.jsonl").write_text("\n".join(lines) + "\n")
    write_viewer(tmp_path / "v", "c", [cell])
    page = (tmp_path / "v" / "cells" / f"{cell.slug}.html").read_text()
    table = page[page.index("<table id='llm-calls'>") :]
    assert "llm_log.jsonl: 3 calls; the whole log" in page
    assert "<td>m&lt;b&gt;</td><td>200</td><td>1200</td><td>300</td><td>40</td><td>0.0042</td>" in table
    assert "<script>" not in page and "&lt;script&gt;alert(1)" in table and "<img" not in page
    assert "not a call: not json &lt;img src=x&gt;" in table and "<td>llm_budget</td>" in table
    assert f"request (first {viewer.LLM_BODY_SHOWN} of" in table and "x" * 2100 not in table
    # the page follows the log; a log bigger than what is read shows its first calls
    monkeypatch.setattr(viewer, "LLM_LOG_SHOWN_BYTES", len(lines[0]) + 5)
    (cell.cell_dir / "llm_log.jsonl").write_text("\n".join(lines) * 3)
    assert write_viewer(tmp_path / "v", "c", [cell]).pages_written == 1
    page = (tmp_path / "v" / "cells" / f"{cell.slug}.html").read_text()
    assert f"1 calls of the first {len(lines[0]) + 5} of" in page
    # a link is never followed
    (cell.cell_dir / "llm_log.jsonl").unlink()
    (cell.cell_dir / "llm_log.jsonl").symlink_to("/dev/zero")
    write_viewer(tmp_path / "v", "c", [cell])
    assert "llm_log.jsonl: cannot be read" in (tmp_path / "v" / "cells" / f"{cell.slug}.html").read_text()
