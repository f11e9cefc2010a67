"""What each job asks the scheduler for, from the cell and the site's knobs.

One set of resources serves both executor plugins: the Slurm plugin reads `runtime`
(minutes), `gpu` or `gres`, `mem_mb`, `cpus_per_task`; the HTCondor plugin reads
`request_gpus`, `htcondor_request_mem_mb`, `htcondor_request_disk_mb`,
`allowed_job_duration` (seconds) and `classad_*`, and takes request_cpus from the rule's
threads. Each ignores the other's keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.settings import Settings


def solve_runtime_minutes(cell: Cell, settings: Settings) -> int:
    """Walltime of a solve job: the agent's budget, the margin and grace before it is
    killed, and the site's allowance for preparing the job dir and saving the model."""
    solve = settings.solve
    minutes = (
        cell.budget_seconds / 60
        + float(solve.timeout_margin_minutes)
        + float(solve.kill_grace_seconds) / 60
        + float(settings.site.jobs.solve_overhead_minutes)
    )
    return math.ceil(minutes)


def job_resources(cell: Cell, settings: Settings, stage: str) -> dict[str, Any]:
    """The resources of the `solve` or `evaluate` job of a cell."""
    jobs = settings.site.jobs
    knobs = jobs.resources(stage)
    runtime = solve_runtime_minutes(cell, settings) if stage == "solve" else int(jobs.evaluate_runtime_minutes)
    gpus = cell.num_gpus
    res: dict[str, Any] = {
        "runtime": runtime,
        "mem_mb": knobs.mem_mb,
        "disk_mb": knobs.disk_mb,
        "cpus_per_task": knobs.cpus,
        # HTCondor's names for the same requests (its request_cpus is the rule's threads)
        "htcondor_request_mem_mb": knobs.mem_mb,
        "htcondor_request_disk_mb": knobs.disk_mb,
        "allowed_job_duration": runtime * 60,
        "request_gpus": gpus,
        "classad_PtbCampaign": settings.name,
        "classad_PtbCell": cell.slug,
    }
    # every key always present (falsy = not requested), so each rule has one key set
    gres_style = jobs.slurm_gpu_style == "gres"
    res["gpu"] = 0 if gres_style else gpus
    res["gres"] = f"gpu:{gpus}" if gres_style and gpus else ""
    return res


def job_threads(settings: Settings, stage: str) -> int:
    """CPU cores of a solve or evaluate job (capped to the machine's by local runs)."""
    return int(settings.site.jobs.resources(stage).cpus)


def rule_resources(campaign: Campaign, stage: str) -> dict[str, Any]:
    """A rule's `resources:`: per key of job_resources, the value where it is the same for
    every cell of the campaign, else a function of the job's wildcards. Snakemake calls
    each function once per job through `inspect.signature`, which dominates planning
    large campaigns: constants cost nothing."""
    settings = campaign.settings
    shapes = [Cell("_", "_", "_", h, g, 0) for h in campaign.hours for g in campaign.num_gpus]
    by_setting = [job_resources(cell, settings, stage) for cell in shapes]
    per_cell = {"classad_PtbCell"}  # names the cell itself

    def one(key: str) -> Callable[[Any], Any]:
        return lambda wildcards: job_resources(Cell.from_wildcards(wildcards), settings, stage)[key]

    return {
        key: one(key) if key in per_cell or len({r[key] for r in by_setting}) > 1 else value
        for key, value in by_setting[0].items()
    }
