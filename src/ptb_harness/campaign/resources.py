"""What each job asks the scheduler for, from the cell and the site's knobs.

One set of resources serves both executor plugins: the Slurm plugin reads `runtime`
(minutes), `gpu` or `gres`, `mem_mb`, `cpus_per_task`; the HTCondor plugin reads
`request_gpus`, `htcondor_request_mem_mb`, `htcondor_request_disk_mb`,
`allowed_job_duration` (seconds) and `classad_*`, and takes request_cpus from the rule's
threads. Each ignores the other's keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ptb_harness.campaign.cells import Cell, format_hours


def solve_runtime_minutes(cell: Cell, config: Mapping[str, Any]) -> int:
    """Walltime of a solve job: the agent's budget, the margin and grace before it is
    killed, and the site's allowance for preparing the job dir and saving the model."""
    solve, site = config["solve"], config["site"]
    minutes = (
        cell.budget_seconds / 60
        + float(solve["timeout_margin_minutes"])
        + float(solve["kill_grace_seconds"]) / 60
        + float(site["solve_overhead_minutes"])
    )
    return math.ceil(minutes)


def job_resources(cell: Cell, config: Mapping[str, Any], stage: str) -> dict[str, Any]:
    """The resources of the `solve` or `evaluate` job of a cell."""
    site = config["site"]
    knobs = site[f"{stage}_resources"]
    if stage == "solve":
        runtime = solve_runtime_minutes(cell, config)
        gpus = cell.num_gpus
    else:
        runtime = int(site["evaluate_runtime_minutes"])
        gpus = cell.num_gpus
    res: dict[str, Any] = {
        "runtime": runtime,
        "mem_mb": knobs["mem_mb"],
        "disk_mb": knobs["disk_mb"],
        "cpus_per_task": knobs["cpus"],
        # HTCondor's names for the same requests (its request_cpus is the rule's threads)
        "htcondor_request_mem_mb": knobs["mem_mb"],
        "htcondor_request_disk_mb": knobs["disk_mb"],
        "allowed_job_duration": runtime * 60,
        "request_gpus": gpus,
        "classad_PtbCampaign": config["name"],
        "classad_PtbCell": cell.slug,
    }
    # every key always present (falsy = not requested), so each rule has one key set
    gres_style = site["slurm_gpu_style"] == "gres"
    res["gpu"] = 0 if gres_style else gpus
    res["gres"] = f"gpu:{gpus}" if gres_style and gpus else ""
    return res


def job_threads(config: Mapping[str, Any], stage: str) -> int:
    """CPU cores of a solve or evaluate job (capped to the machine's by local runs)."""
    return int(config["site"][f"{stage}_resources"]["cpus"])


def rule_resources(config: Mapping[str, Any], stage: str) -> dict[str, Any]:
    """A rule's `resources:`: per key of job_resources, the value where it is the same for
    every cell of the campaign, else a function of the job's wildcards. Snakemake calls
    each function once per job through `inspect.signature`, which dominates planning
    large campaigns: constants cost nothing."""
    settings = [Cell("_", "_", "_", format_hours(h), int(g), 0) for h in config["hours"] for g in config["num_gpus"]]
    by_setting = [job_resources(cell, config, stage) for cell in settings]
    per_cell = {"classad_PtbCell"}  # names the cell itself

    def one(key: str) -> Callable[[Any], Any]:
        return lambda wildcards: job_resources(Cell.from_wildcards(wildcards), config, stage)[key]

    return {
        key: one(key) if key in per_cell or len({r[key] for r in by_setting}) > 1 else value
        for key, value in by_setting[0].items()
    }
