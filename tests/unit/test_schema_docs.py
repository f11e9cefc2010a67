"""The configuration reference is current, names every key, and the docs' links resolve."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ptb_harness.core.schema import load_schema
from ptb_harness.core.schema_docs import reference_markdown

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "configuration.md"
#: [text](target): a Markdown link; an image's too
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_the_reference_is_what_the_schema_writes():
    assert REFERENCE.read_text(encoding="utf-8") == reference_markdown(load_schema()), (
        "docs/configuration.md is not current: run .venv/bin/python scripts/config_reference.py"
    )
    check = subprocess.run(
        [sys.executable, str(REPO / "scripts/config_reference.py"), "--check"], capture_output=True, timeout=60
    )
    assert check.returncode == 0, check.stderr


def _keys(path: str, node: dict) -> list[str]:
    out = [path]
    for name, child in node.get("properties", {}).items():
        out += _keys(f"{path}.{name}", child)
    items = node.get("items")
    if isinstance(items, dict):
        for name, child in items.get("properties", {}).items():
            out += _keys(f"{path}[].{name}", child)
    return out


def test_every_key_of_the_schema_has_its_row_with_its_default():
    schema = load_schema()
    text = reference_markdown(schema)
    for name, node in schema["properties"].items():
        for key in _keys(name, node)[1 if node.get("type") == "object" else 0 :]:
            assert f"| `{key}` |" in text, key
    assert '| `site.runtime` | `"none"`, `"bwrap"`, `"apptainer"` | `"none"` |' in text
    assert "| `agents[].reprompt` | boolean |  |" in text  # no default: its description says it


def test_a_changed_description_makes_the_reference_stale():
    schema = load_schema()
    changed = {**schema, "properties": {**schema["properties"], "name": {**schema["properties"]["name"]}}}
    changed["properties"]["name"]["description"] = "another | text"
    assert reference_markdown(changed) != reference_markdown(schema)
    assert "another \\| text" in reference_markdown(changed)  # a pipe cannot break the table


def test_every_relative_link_in_the_readme_and_docs_resolves():
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), REPO / "bench" / "README.md"]
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL, or an anchor of the same page
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_the_readme_is_one_page_and_the_index_lists_every_doc():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    first_block = readme.split("```")[1]  # the two commands open the page
    assert "bash scripts/setup.sh && .venv/bin/snakemake --profile profiles/local" in first_block
    assert "bash scripts/setup.sh && .venv/bin/ptb-harness setup-agents && .venv/bin/pytest" in first_block
    index = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    pages = {p.name for p in (REPO / "docs").glob("*.md")} - {"index.md"}
    assert pages and not {p for p in pages if f"]({p})" not in index}, "docs/index.md must link every page"
