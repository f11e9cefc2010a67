"""A cell's files are named in one place (``ptb_harness.core.cell_files``): no other module
of the harness or the workflow writes one of their names as a string literal, so adding a
file or renaming one is a change in one module. Docstrings and comments may name them.

``src/ptb_scorer`` is left out: it is the task side of the evaluate.py contract, never
imports the harness, and its defaults (``--json-output-file metrics.json``) are what an
agent running evaluate.py in its task dir gets."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from conftest import REPO

from ptb_harness.core.cell_files import FILE_NAMES

OWNER = REPO / "src" / "ptb_harness" / "core" / "cell_files.py"
#: a name standing alone (not inside a longer name), or any stage's state record
_NAMES = sorted(FILE_NAMES, key=len, reverse=True)
LITERAL = re.compile(r"(?<![\w.])(?:" + "|".join(re.escape(n) for n in _NAMES) + r")(?![\w])|\.state\.json")
_SKIP = {tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT}


def code_files(repo: Path) -> list[Path]:
    files = [p for p in (repo / "src" / "ptb_harness").rglob("*.py") if p != OWNER]
    files += sorted((repo / "workflow").rglob("*.smk")) + sorted((repo / "workflow").rglob("*.py"))
    return sorted(files) + [repo / "Snakefile"]


def _is_docstring(tokens: list[tokenize.TokenInfo], i: int) -> bool:
    """A string that is a statement of its own (a docstring, or a bare string)."""
    before = next((t for t in reversed(tokens[:i]) if t.type not in _SKIP), None)
    after = next((t for t in tokens[i + 1 :] if t.type not in _SKIP), None)
    starts = before is None or before.type == tokenize.NEWLINE
    return starts and (after is None or after.type in (tokenize.NEWLINE, tokenize.ENDMARKER))


def literal_names(path: Path) -> list[str]:
    """`file:line: literal` for each string literal in path that names a cell file."""
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    return [
        f"{path}:{t.start[0]}: {t.string[:120]}"
        for i, t in enumerate(tokens)
        if t.type == tokenize.STRING and LITERAL.search(t.string) and not _is_docstring(tokens, i)
    ]


def test_no_cell_file_name_is_written_as_a_literal_outside_cell_files():
    found = [hit for path in code_files(REPO) for hit in literal_names(path)]
    assert not found, "name these through ptb_harness.core.cell_files:\n" + "\n".join(found)


def test_the_check_finds_a_planted_literal_and_passes_docstrings_and_comments(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        '"""Reads solve.json and metrics.json."""\n'
        "# judgement.json is the judge's\n"
        "def f(cell_dir):\n"
        '    """What evaluate.json says."""\n'
        '    return cell_dir / "metrics.json", f"{cell_dir}/logs/solve.log", "solve.attempts.json"\n'
        'STATE = f"{stage}.state.json"\n'
        'KEY = "final_model_files"  # a key, not a file\n'
    )
    hits = literal_names(planted)
    assert [h.split(":")[1] for h in hits] == ["5", "5", "5", "6"], hits
