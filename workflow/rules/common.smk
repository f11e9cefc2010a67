# Configuration, paths, wildcard constraints and input functions shared by all rules.
import sys
from pathlib import Path

from ptb_harness.campaign.config import load_config
from ptb_harness.core.errors import ConfigError
from ptb_harness.campaign.resources import job_threads, rule_resources
from ptb_harness.core.cell_files import (
    FINAL_MODEL,
    JUDGEMENT,
    METRICS,
    RAW_TRACE,
    RAW_TRACE_SANITIZED,
    SOLVE,
    TRANSCRIPT,
    TRANSCRIPT_SANITIZED,
    USAGE,
    stage_benchmark,
    stage_log,
)
from ptb_harness.core.layout import (
    CELL_DIR_PATTERN,
    COLLECT_OUTPUTS,
    HOURS_PATTERN,
    NAME_PATTERN,
    TINY_MODEL,
    TINY_MODEL_LOG,
)

try:
    CAMPAIGN = load_config(config, workdir=Path.cwd(), for_run=True)
except ConfigError as e:
    # one line naming the key; nothing is planned or started
    sys.exit(f"config error: {e}")
if workflow.is_main_process and (untrusted := CAMPAIGN.untrusted_warning()):
    # once per run (not in every job): `none` is for trusted agents only
    print(untrusted, file=sys.stderr)
if workflow.is_main_process and (no_cgroup := CAMPAIGN.cgroup_warning()):
    # once per run: without a cgroup the agents' memory and processes are not capped
    print(no_cgroup, file=sys.stderr)

# as configured (relative to the working directory, or absolute), so plans stay readable
RESULTS = CAMPAIGN.settings.paths.results_dir_text
# one directory per cell; the layout is defined once, in ptb_harness.core.layout, and
# the cell's files are named in ptb_harness.core.cell_files
CELL = f"{RESULTS}/{CELL_DIR_PATTERN}"
# the campaign's tables and plots, named once in ptb_harness.core.layout
OUT = {name: f"{RESULTS}/{rel}" for name, rel in COLLECT_OUTPUTS.items()}
# every cell is judged when the campaign enables the judge (its flags change the leaderboard)
JUDGED = (JUDGEMENT,) if CAMPAIGN.settings.judge.enabled else ()


wildcard_constraints:
    agent=NAME_PATTERN,
    task=NAME_PATTERN,
    model=NAME_PATTERN,
    hours=HOURS_PATTERN,
    num_gpus=r"\d+",
    run=r"\d+",


def all_cell_files(name):
    """One file per cell of the campaign, e.g. every metrics.json (METRICS)."""
    return [f"{CELL}/{name}".format(**c.wildcards) for c in CAMPAIGN.cells()]


def every_cell(*names):
    """An input function: the named file of every cell. A function, so that Snakemake
    lists a 20,000-cell campaign's files only when `all` or `collect` is planned, not
    when it is given other targets (the rerun one-liner of `ptb-harness status --targets`).
    """
    return lambda wildcards: [f for name in names for f in all_cell_files(name)]


def base_model_input(wildcards):
    """A local base model is an input of solve, so a rule can build it (the demo's does)."""
    model = CAMPAIGN.models[wildcards.model]
    return {"base_model": model.path} if model.path is not None else {}
