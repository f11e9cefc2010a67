"""Where a campaign's files live below its results dir: one directory per cell, and the
campaign-wide outputs of collect. The Snakemake rules, the stages, ``status`` and
``collect`` all build their paths from here, so there is one definition of the layout.
(The files inside a cell dir are named in ``core.cell_files``.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

#: Names that become path components: agents, tasks, models. No '/', no '..', no
#: whitespace, not starting with '.' or '-'.
NAME_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.+=-]*"
#: Hours as they appear in a cell's directory name (canonical decimal, see campaign.cells.format_hours).
HOURS_PATTERN = r"[0-9]+(?:\.[0-9]+)?"

#: Path of a cell's directory below the results dir; the Snakemake rules use the same
#: pattern with {wildcards}.
CELL_DIR_PATTERN = "cells/{agent}/{task}/{model}/{hours}h-{num_gpus}gpu-run{run}"

#: The campaign-wide outputs of collect below the results dir, by name. The collect rule
#: names its outputs with these keys and `ptb-harness collect` writes the same paths, so
#: the rule, the CLI, the tables and the plots agree on one list.
COLLECT_OUTPUTS = {
    "cells": "tables/cells.csv",
    "leaderboard_csv": "tables/leaderboard.csv",
    "leaderboard_md": "tables/leaderboard.md",
    "leaderboard_html": "tables/leaderboard.html",
    "leaderboard_png": "plots/leaderboard.png",
    "heatmap_png": "plots/heatmap.png",
    "time_png": "plots/time_vs_budget.png",
    "gpu_usage": "tables/gpu_usage.csv",
    "gpu_usage_png": "plots/gpu_usage.png",
    "stage_hours": "tables/stage_hours.csv",
    "viewer": "viewer/index.html",  # the campaign viewer; its other pages are written beside it
}
#: per-cell GPU plots over time, for a small named set of cells (not a rule output: the
#: set changes as the campaign runs, and the report shows campaign-level figures instead)
CELL_GPU_PLOTS = "plots/gpu"

#: The demo's tiny base models, built by the workflow (rule tiny_base_model) below the
#: working directory, and each build's log.
TINY_MODEL = "resources/models/tiny-{name}"
TINY_MODEL_LOG = "resources/models/logs/tiny-{name}.log"
_TINY_MODEL_RE = re.compile("^" + re.escape(TINY_MODEL).replace(r"\{name\}", "[A-Za-z0-9_.+=-]+") + "/?$")


def cell_dir_rel(wildcards: Mapping[str, str]) -> str:
    """A cell's directory below the results dir, from its wildcards."""
    return CELL_DIR_PATTERN.format(**wildcards)


def collect_outputs(results_dir: Path) -> dict[str, Path]:
    """COLLECT_OUTPUTS below a results dir."""
    return {name: Path(results_dir) / rel for name, rel in COLLECT_OUTPUTS.items()}


def built_by_workflow(model_path: str) -> bool:
    """Whether a local base model path is one a rule of the workflow builds (the demo's)."""
    return _TINY_MODEL_RE.match(model_path) is not None
