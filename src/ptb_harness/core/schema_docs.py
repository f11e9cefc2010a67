"""The configuration reference (``docs/configuration.md``), written from the schema's own
descriptions and defaults: one table per top-level key, a row per key beneath it, so the
reference cannot drift from what the reader validates (``tests/unit/test_schema_docs.py``
fails when the file is not what this module writes; ``scripts/config_reference.py``
rewrites it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

HEADER = """# Configuration reference

Every key of a campaign (`config/config.yaml`, or the file given with `--config
campaign=FILE`) and every site knob (`site`, in a profile's `site.yaml`), with its type,
default and description. Written from `config/config.schema.yaml` by
`python scripts/config_reference.py`; edit the schema, not this file.
"""


def _type(node: dict[str, Any]) -> str:
    kind = node.get("type", "")
    kinds = kind if isinstance(kind, list) else [kind]
    text = " or ".join(str(k) for k in kinds if k)
    if "enum" in node:
        text = ", ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    return text or "any"


def _cell(text: str) -> str:
    """One line a Markdown table cell can hold."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(node: dict[str, Any]) -> str:
    if "default" not in node:
        return ""
    return f"`{json.dumps(node['default'], separators=(', ', ': '))}`"


def _rows(path: str, node: dict[str, Any]) -> Iterator[tuple[str, str, str, str]]:
    """(key path, type, default, description) of node and every key beneath it."""
    yield path, _type(node), _default(node), node.get("description", "")
    for name, child in node.get("properties", {}).items():
        yield from _rows(f"{path}.{name}", child)
    items = node.get("items")
    if isinstance(items, dict):
        for name, child in items.get("properties", {}).items():
            yield from _rows(f"{path}[].{name}", child)


def reference_markdown(schema: dict[str, Any]) -> str:
    """The reference page for ``schema`` (the loaded config.schema.yaml)."""
    out = [HEADER]
    for name, node in schema.get("properties", {}).items():
        out.append(f"## `{name}`\n")
        rows = list(_rows(name, node))
        if node.get("type") == "object":  # a section: its description once, then its keys
            out.append(_cell(node.get("description", "")) + "\n")
            rows = rows[1:]
        out.append("| key | type | default | description |")
        out.append("|---|---|---|---|")
        for key, kind, default, text in rows:
            out.append(f"| `{key}` | {_cell(kind)} | {_cell(default)} | {_cell(text)} |")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
