"""The package's structure: a module imports only from its own layer or the ones below it
(see ``ptb_harness/__init__.py``), no modules import each other in a cycle, and only the
campaign's reader reads the configuration mapping. Function-level and TYPE_CHECKING
imports count: a cycle hidden behind one is still a cycle of the design. Each check is
also run on a planted package that breaks it, so a check that cannot fail fails here."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import pytest
from conftest import REPO

PACKAGE = REPO / "src" / "ptb_harness"
# bottom to top; a top-level module's layer is its own name
LAYERS = ["core", "judging", "runtime", "gpu", "traces", "gateway", "campaign", "stages", "results", "top"]
TOP = {"cli", "doctor", "demo", "prefetch", "workflow_job", "__main__", "__init__"}
#: the one module that reads the configuration mapping (``config[...]``, ``site.get(...)``)
READER = PACKAGE / "campaign" / "reader.py"


def layer_of(module: str) -> int:
    """module: dotted name below the package, e.g. 'stages.solve'."""
    head = module.split(".")[0]
    return LAYERS.index("top" if head in TOP or head == "" else head)


def module_of(path: Path, package: Path) -> str:
    """'stages.solve' for <package>/stages/solve.py, 'campaign' for its __init__.py."""
    parts = path.relative_to(package).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def harness_imports(path: Path, name: str = "ptb_harness") -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, dotted module below the package, names imported from it) of every import of
    the package in path ('' for the package itself)."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [(node.module, tuple(a.name for a in node.names))]
        elif isinstance(node, ast.Import):
            modules = [(a.name, ()) for a in node.names]
        else:
            continue
        for module, names in modules:
            if module == name or module.startswith(name + "."):
                found.append((node.lineno, module.removeprefix(name).removeprefix("."), names))
    return found


def modules_of(package: Path) -> dict[str, Path]:
    return {module_of(p, package): p for p in sorted(package.rglob("*.py"))}


def upward_imports(path: Path, package: Path, name: str = "ptb_harness") -> list[str]:
    own = module_of(path, package)
    return [
        f"{path.relative_to(package.parent)}:{line} imports {name}.{module}"
        f" ({LAYERS[layer_of(module)]} is above {LAYERS[layer_of(own)]})"
        for line, module, _ in harness_imports(path, name)
        if module and layer_of(module) > layer_of(own)
    ]


def import_graph(package: Path, name: str = "ptb_harness") -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (`from pkg.a import b` imports a.b
    when that is a module; a package's __init__ stands for the package)."""
    known = modules_of(package)
    graph = {}
    for module, path in known.items():
        targets = set()
        for _, imported, names in harness_imports(path, name):
            targets |= {imported, *(f"{imported}.{n}".lstrip(".") for n in names)}
        graph[module] = {t for t in targets if t in known and t != module}
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules start imports, directly or through others."""
    found: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        module = todo.pop()
        if module not in found:
            found.add(module)
            todo.extend(graph.get(module, ()))
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each set of modules that import each other (directly or through others), sorted."""
    reach = {module: _reachable(graph, module) for module in graph}
    cycles: list[list[str]] = []
    for module in sorted(graph):
        if module in reach[module] and not any(module in c for c in cycles):
            cycles.append(sorted(m for m in reach[module] if module in reach[m]))
    return cycles


#: Reads of the raw configuration mapping: `config[...]`, `site[...]` and their `.get(...)`,
#: and `.get(...)` or a string key on any other settings mapping (`board_config.get(`,
#: `leaderboard_settings["missing"]`): consumers get typed settings.
RAW_CONFIG_READ = re.compile(
    r"\b(?:config|site)\s*(?:\[|\.get\()"
    r"|\b(?:\w+_config|\w*settings|\w+_cfg|cfg)\s*(?:\[\s*[\"']|\.get\()"
)


def raw_config_reads(files: Iterable[Path]) -> list[str]:
    return [
        f"{path}:{n}: {line.strip()}"
        for path in files
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if RAW_CONFIG_READ.search(line)
    ]


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path: Path):
    upward = upward_imports(path, PACKAGE)
    assert not upward, "\n".join(upward)


def test_no_modules_import_each_other_in_a_cycle():
    cycles = import_cycles(import_graph(PACKAGE))
    assert not cycles, "import cycles (split the shared part into a module both import):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_every_module_is_in_a_layer():
    for path in MODULES:
        head = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        assert head in LAYERS or head in TOP, f"{path}: put it in a layer package or name it in TOP"


def test_only_the_reader_reads_the_config_mapping():
    """Everything else gets typed settings (ptb_harness.campaign.settings, built by
    campaign.reader), so a knob is followed from the schema to its use through one attribute."""
    files = [p for p in MODULES if p != READER]
    files += sorted((REPO / "workflow").rglob("*.smk")) + sorted((REPO / "workflow" / "scripts").glob("*.py"))
    found = raw_config_reads(files)
    assert not found, "read the typed settings instead:\n" + "\n".join(found)


# -- each check, on a planted package that breaks it ------------------------------------------


def _plant(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for d in [root / "pkg", *(p for p in (root / "pkg").rglob("*") if p.is_dir())]:
        (d / "__init__.py").touch()
    return root / "pkg"


def test_a_planted_upward_import_fails(tmp_path: Path):
    pkg = _plant(tmp_path, {"core/low.py": "def f():\n    from pkg.results.high import g\n", "results/high.py": ""})
    assert upward_imports(pkg / "core" / "low.py", pkg, "pkg") == [
        "pkg/core/low.py:2 imports pkg.results.high (results is above core)"
    ]
    assert upward_imports(pkg / "results" / "high.py", pkg, "pkg") == []


def test_a_planted_import_cycle_fails(tmp_path: Path):
    pkg = _plant(
        tmp_path,
        {
            # a TYPE_CHECKING import is an import of the design too
            "campaign/cells.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg.campaign.settings import S\n",
            "campaign/settings.py": "from pkg.campaign import cells\n",
            "campaign/leaf.py": "import pkg.core.errors\n",
            "core/errors.py": "",
        },
    )
    graph = import_graph(pkg, "pkg")
    # `from pkg.campaign import cells` imports the package and its module cells
    assert graph["campaign.settings"] == {"campaign", "campaign.cells"} and graph["campaign.leaf"] == {"core.errors"}
    assert import_cycles(graph) == [["campaign.cells", "campaign.settings"]]


def test_a_planted_read_of_a_settings_mapping_fails(tmp_path: Path):
    pkg = _plant(
        tmp_path,
        {
            "results/board.py": 'rule = board_config.get("weighting", "equal")\n',
            "results/site.py": 'mode = site["gpu_reap"]\n',
            # typed settings, a text sliced, an item of a list: not a read of a settings mapping
            "results/typed.py": "rule = settings.leaderboard.weighting\ntext = final_config[:800]\n"
            'x = item.get("model")\n',
        },
    )
    found = raw_config_reads(sorted(pkg.rglob("*.py")))
    assert [f.split(":", 1)[0] for f in found] == [str(pkg / "results" / "board.py"), str(pkg / "results" / "site.py")]
