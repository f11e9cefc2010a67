"""What the scheduler knows of a job: its identity (recorded with every stage) and, for
`ptb-harness status`, which recorded jobs are still alive."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

#: What identifies the job in its scheduler (recorded, so every cell traces to a job).
SCHEDULER_VARS = (
    "SLURM_JOB_ID",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_GPUS",
    "_CONDOR_AssignedGPUs",
)


def scheduler_job(host_env: Mapping[str, str]) -> dict[str, str]:
    job = {k: host_env[k] for k in SCHEDULER_VARS if k in host_env}
    ad = host_env.get("_CONDOR_JOB_AD")
    if ad:
        try:
            for line in Path(ad).read_text().splitlines():
                key, _, value = line.partition(" = ")
                if key in ("ClusterId", "ProcId", "RemoteHost"):
                    job[f"condor_{key}"] = value.strip('"')
        except OSError:
            pass
    return job


def live_slurm_jobs(timeout_s: float = 20) -> set[str] | None:
    """Job ids Slurm still has (pending or running); None where squeue is absent or fails."""
    squeue = shutil.which("squeue")
    if squeue is None:
        return None
    try:
        res = subprocess.run(
            [squeue, "--noheader", "--format=%i", "--me"], capture_output=True, text=True, timeout=timeout_s
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if res.returncode != 0:
        return None
    return {line.strip() for line in res.stdout.splitlines() if line.strip()}
