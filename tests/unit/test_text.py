"""core.text: agent-controlled text stays text in terminals and logs, Markdown tables and
CSV files (table tests of each helper, and properties over any string)."""

from __future__ import annotations

import csv
import html
import io
import logging
import re
import unicodedata

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from ptb_harness.core.text import (
    TRANSCRIPT_CONTINUATION,
    TerminalLogFormatter,
    csv_field,
    csv_text,
    markdown_cell,
    markdown_row,
    markdown_table,
    terminal_line,
    transcript_event,
    transcript_line_bytes,
    transcript_text,
    valid_text,
)

#: what a hostile agent writes: a newline that forges a heading and a row, a pipe, raw
#: HTML, ESC sequences (window title, erase line), CR, BEL, C1 CSI, bidi override,
#: zero-width space, BOM, a line separator, a lone surrogate (an undecodable byte)
HOSTILE = (
    "m.safetensors|x\n# FORGED\n<img src=x onerror=alert(1)>`code`"
    "\x1b]0;pwned\x07\x1b[2K\rFAKE STATUS: 1 scored\x9b31m\u202etxt.exe\u200b\ufeff\u2028\udcff"
)
#: the categories no output may carry raw (core.text's hidden set)
HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs"}

_ESCAPE = re.compile(r"\\(\\|n|r|t|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")


def unescape(text: str) -> str:
    """The inverse of terminal_line (the test's oracle)."""
    named = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
    return _ESCAPE.sub(lambda m: named.get(m[1]) or chr(int(m[1][1:], 16)), text)


def raw_hidden(text: str) -> list[str]:
    return [c for c in text if unicodedata.category(c) in HIDDEN]


# hypothesis: any string, with the dangerous characters drawn often
DANGEROUS = st.sampled_from(
    list("\n\r\t\x00\x1b\x07\x7f\x85\x9b\u202e\u2066\u200b\u200d\ufeff\u2028\u2029\udcff|`\\<>&*_[]()~#='+-@\"")
)
ANY_TEXT = st.lists(st.one_of(st.characters(), DANGEROUS), max_size=40).map("".join)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, accuracy 0.5", "plain text, accuracy 0.5"),
        ("é 中文 ☃ 🙂", "é 中文 ☃ 🙂"),  # printable non-ASCII stays as it is
        ("a\nb", "a\\nb"),
        ("a\r\nb\tc", "a\\r\\nb\\tc"),
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),
        ("\x1b[2K\rFAKE", "\\x1b[2K\\rFAKE"),
        ("\x00\x7f", "\\x00\\x7f"),
        ("\x9b31m", "\\x9b31m"),  # C1 CSI: an escape sequence without ESC
        ("\x85", "\\x85"),  # NEL: a newline to some terminals
        ("abc\u202etxt.exe", "abc\\u202etxt.exe"),  # right-to-left override
        ("\u2066x\u2069", "\\u2066x\\u2069"),  # bidi isolates
        ("a\u200bb\u200dc\ufeff", "a\\u200bb\\u200dc\\ufeff"),  # zero-width, BOM
        ("a\u2028b\u2029", "a\\u2028b\\u2029"),  # line and paragraph separators
        ("\U000e0041", "\\U000e0041"),  # a tag character (invisible)
        ("bad\udcffbyte", "bad\\udcffbyte"),  # os.fsdecode of b"bad\xffbyte"
        ("C:\\dir\\n", "C:\\\\dir\\\\n"),  # a backslash is doubled: never read as an escape
        (42, "42"),
    ],
)
def test_terminal_line_shows_every_hidden_character_as_its_escape(text, shown):
    assert terminal_line(text) == shown
    assert unescape(shown) == str(text)


@given(ANY_TEXT)
@settings(max_examples=500, deadline=None)
def test_terminal_line_is_one_safe_line_and_reversible(text):
    line = terminal_line(text)
    assert raw_hidden(line) == []  # no control, format, separator or surrogate character
    assert len(line.splitlines()) <= 1  # str.splitlines knows every line break Python does
    line.encode("utf-8")  # printable to any UTF-8 terminal (a lone surrogate would raise)
    assert unescape(line) == text


def test_the_log_formatter_keeps_one_record_one_line():
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(TerminalLogFormatter("%(levelname)s %(message)s"))
    log = logging.getLogger("test_text.formatter")
    log.addHandler(handler)
    try:
        log.warning("agent_failed: %s", "final_model/a\nWARNING forged\x1b[2K")
        try:
            raise ValueError("boom\x1b]0;x\x07")
        except ValueError:
            log.exception("failed: %s", "x\ny")
    finally:
        log.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert lines[0] == "WARNING agent_failed: final_model/a\\nWARNING forged\\x1b[2K"
    assert lines[1] == "ERROR failed: x\\ny"
    assert lines[2].startswith("Traceback") and lines[-1] == "ValueError: boom\\x1b]0;x\\x07"
    assert raw_hidden(out.getvalue().replace("\n", "")) == []


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("accuracy 0.5", "accuracy 0.5"),
        ("a|b", "a\\|b"),
        ("a\n# FORGED", "a\\\\n# FORGED"),  # rendered: a\n# FORGED, in the same cell
        ("<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)&gt;"),
        ("&lt;", "&amp;lt;"),
        ("`code`", "\\`code\\`"),
        ("*bold* and **strong**", "\\*bold* and \\*\\*strong\\**"),
        ("~~gone~~", "\\~\\~gone\\~\\~"),
        ("[click](javascript:alert(1))", "[click\\](javascript:alert(1))"),
        ("![x](http://e/x.png)", "![x\\](http://e/x.png)"),
        # what the harness writes itself reads as before
        ("0.600* (1/2)", "0.600* (1/2)"),
        ("agent_failed: final_model/config.json", "agent_failed: final_model/config.json"),
        ("contamination: [ngram] 40 of 50", "contamination: [ngram] 40 of 50"),
        ("_x_", "\\_x_"),
        ("back\\slash", "back\\\\\\\\slash"),  # doubled, then escaped: renders as back\\slash
    ],
)
def test_markdown_cell(text, cell):
    assert markdown_cell(text) == cell


_MD = MarkdownIt("commonmark").enable("table")
_TD = re.compile(r"<td>(.*?)</td>", re.S)


def rendered_cells(markdown: str) -> list[list[str]]:
    """The cells of each body row of the first table in markdown, as a browser shows them."""
    page = _MD.render(markdown)
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0] if "<tbody>" in page else ""
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
    for row in rows:
        assert "<" not in "".join(_TD.findall(row)), row  # no tag inside a cell: no HTML, code, link, emphasis
    return [[html.unescape(c) for c in _TD.findall(row)] for row in rows]


def test_a_hostile_cell_stays_in_its_row_of_a_rendered_table():
    lines = markdown_table(["name", "evidence", "n"], [["a", HOSTILE, 1], ["b", "ok", 2]])
    page = "\n".join(["# Leaderboard", "", *lines, ""])
    assert [line for line in page.splitlines() if line.startswith("#")] == ["# Leaderboard"]
    assert rendered_cells(page) == [["a", terminal_line(HOSTILE), "1"], ["b", "ok", "2"]]
    assert raw_hidden(page.replace("\n", "")) == []


@given(ANY_TEXT)
@settings(max_examples=300, deadline=None)
def test_any_markdown_cell_stays_one_cell_and_renders_as_its_terminal_line(text):
    row = markdown_row(["x", text, "y"])
    assert "\n" not in row and "\r" not in row and raw_hidden(row) == []
    assert re.sub(r"\\.", "", row).count("|") == 4  # every other pipe is escaped
    cells = rendered_cells("\n".join(["| a | b | c |", "|---|---|---|", row]))
    # a table cell's edges are trimmed by every renderer: the inside is the terminal_line
    assert cells == [["x", terminal_line(text).strip(), "y"]]


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("agent_failed", "agent_failed"),
        ('=HYPERLINK("http://e","x")', '\'=HYPERLINK("http://e","x")'),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
        ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
        ("'quoted", "''quoted"),  # the prefix is told from the data: one ' is always the prefix
        ("-1", "-1"),  # a plain number is no formula
        ("-0.5e-3", "-0.5e-3"),
        ("+7", "+7"),
        ('a\nb,"c"', 'a\\nb,"c"'),  # the csv module quotes the comma and quote
        ("\t=1", "\\t=1"),
        (0.5, 0.5),
        (None, None),
        (True, True),
    ],
)
def test_csv_field(value, field):
    assert csv_field(value) == field


def test_valid_text_replaces_only_lone_surrogates():
    assert valid_text("bad\udcffbyte\ud800") == "bad\ufffdbyte\ufffd"
    assert valid_text(HOSTILE) == HOSTILE.replace("\udcff", "\ufffd")
    assert valid_text("é 中文 🙂\x1b") == "é 中文 🙂\x1b"


def test_csv_text_escapes_text_columns_only():
    # a table holds valid text only (pandas raises on a lone surrogate: collect makes it valid_text)
    hostile = valid_text(HOSTILE)
    frame = pd.DataFrame(
        {"agent": ["a", "=b"], "evidence": [hostile, None], "accuracy": [0.5, None], "n": pd.array([1, None], "Int64")}
    )
    text = csv_text(frame)
    assert len(text.splitlines()) == 3 and raw_hidden(text.replace("\n", "")) == []
    rows = list(csv.reader(io.StringIO(text)))
    head, *body = rows
    assert head == ["agent", "evidence", "accuracy", "n"]
    assert body == [["a", terminal_line(hostile), "0.5", "1"], ["'=b", "", "", ""]]


PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def csv_unescape(field: str) -> str:
    return unescape(field[1:] if field.startswith("'") else field)


@given(st.lists(ANY_TEXT, min_size=1, max_size=5))
@settings(max_examples=200, deadline=None)
def test_any_text_is_one_csv_line_read_back_to_itself(values):
    values = [valid_text(v) for v in values]
    text = csv_text(pd.DataFrame({"v": values, "k": range(len(values))}))
    assert len(text.splitlines()) == len(values) + 1  # one line per record, whatever the reader
    rows = list(csv.reader(io.StringIO(text)))
    assert len(rows) == len(values) + 1 and all(len(r) == 2 for r in rows)
    for value, (field, _) in zip(values, rows[1:], strict=True):
        # no formula reaches a spreadsheet: what starts like one is a plain number
        assert not field.startswith(("=", "+", "-", "@")) or PLAIN_NUMBER.fullmatch(field), field
        assert field == "" if value == "" else csv_unescape(field) == value


@given(st.one_of(ANY_TEXT, st.text(alphabet="\n\t\r\x1b\x0b\x85\u2028\u202e ab[]", max_size=30)))
@settings(max_examples=500, deadline=None)
def test_transcript_text_breaks_lines_only_at_its_newlines_each_a_continuation(text):
    """Any text: its lines are the text's own, each after the first a continuation line,
    no character any reader breaks a line at or moves the cursor with but the newline; a
    line as read (bytes) and an event's lines are escaped alike."""
    shown = transcript_text(text)
    lines = shown.split("\n")
    assert len(lines) == text.count("\n") + 1 and (shown + "\n").splitlines() == lines
    assert all(line.startswith(TRANSCRIPT_CONTINUATION) for line in lines[1:])
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069]", shown)
    one_line = text.replace("\n", " ")
    data = valid_text(one_line).encode()
    assert transcript_line_bytes(data) == transcript_text(valid_text(one_line)).encode()
    # an event's lines: each text's own, written alike whichever check took them
    texts = [text, one_line, text.replace("\n", "\t")]
    assert transcript_event("[t] ", texts) == "".join(f"[t] {transcript_text(t)}\n" for t in texts).encode(
        "utf-8", "replace"
    )
