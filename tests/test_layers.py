"""The package's layers (see ``ptb_harness/__init__.py``): a module may import only from
its own layer or the ones below it, function-level imports included."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import REPO

PACKAGE = REPO / "src" / "ptb_harness"
# bottom to top; a top-level module's layer is its own name
LAYERS = ["core", "judging", "runtime", "gpu", "traces", "gateway", "campaign", "stages", "results", "top"]
TOP = {"cli", "doctor", "demo", "prefetch", "__main__", "__init__"}


def layer_of(module: str) -> int:
    """module: dotted name below ptb_harness, e.g. 'stages.solve'."""
    head = module.split(".")[0]
    return LAYERS.index("top" if head in TOP or head == "" else head)


def harness_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name == "ptb_harness":
                found.append((node.lineno, ""))
            elif name.startswith("ptb_harness."):
                found.append((node.lineno, name.removeprefix("ptb_harness.")))
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path: Path):
    own = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    upward = [
        f"{path.relative_to(REPO)}:{line} imports ptb_harness.{name}"
        f" ({LAYERS[layer_of(name)]} is above {LAYERS[layer_of(own)]})"
        for line, name in harness_imports(path)
        if name and layer_of(name) > layer_of(own)
    ]
    assert not upward, "\n".join(upward)


def test_every_module_is_in_a_layer():
    for path in MODULES:
        head = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        assert head in LAYERS or head in TOP, f"{path}: put it in a layer package or name it in TOP"


#: `config["..."]`, `site["..."]` and their `.get(...)`: reads of the raw configuration mapping
RAW_CONFIG_READ = re.compile(r"\b(?:config|site)\s*(?:\[|\.get\()")
SETTINGS = PACKAGE / "campaign" / "settings.py"


def test_only_the_settings_module_reads_the_config_mapping():
    """Everything else gets typed settings (ptb_harness.campaign.settings), so a knob is
    followed from the schema to its use through one attribute."""
    files = [p for p in MODULES if p != SETTINGS]
    files += sorted((REPO / "workflow").rglob("*.smk")) + sorted((REPO / "workflow" / "scripts").glob("*.py"))
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in files
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if RAW_CONFIG_READ.search(line)
    ]
    assert not found, "read the typed settings instead:\n" + "\n".join(found)
