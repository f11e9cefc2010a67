"""A cell's job dir on scratch: what the agent may see (the task, solve.sh, its payload,
the prompt, the timer), and the check whether the agent filled it."""

from __future__ import annotations

import contextlib
import os
import shutil
import string
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ptb_harness.campaign.agents import AgentSpec
from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.tasks import TaskSpec
from ptb_harness.core.cell_files import FINAL_MODEL
from ptb_harness.core.errors import HarnessError
from ptb_harness.core.records import atomic_write_text
from ptb_harness.runtime.procs import iso_utc

BUILTIN_PROMPT = Path(__file__).parents[1] / "templates" / "prompt.txt"

_TIMER = """#!/usr/bin/env bash
# Time left for this cell's agent. Written by the harness; the deadline is fixed.
deadline={deadline}
left=$(( deadline - $(date +%s) )); (( left < 0 )) && left=0
if [ "${{1:-}}" = "--seconds" ]; then echo "$left"; exit 0; fi
printf 'Remaining time: %d:%02d:%02d (deadline %s)\\n' $((left/3600)) $((left%3600/60)) $((left%60)) '{deadline_iso}'
"""


@dataclass(frozen=True)
class JobDir:
    """A cell's scratch directory. ``home`` is the agent's HOME; it works in ``home/task``."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def task(self) -> Path:
        return self.home / "task"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def harness(self) -> Path:
        return self.root / "harness"


def render_prompt(campaign: Campaign, cell: Cell, task: TaskSpec, model_source: str, gpu_info: str) -> str:
    custom = campaign.settings.solve.prompt_template
    if (task.dir / "prompt.txt").is_file():
        template_path = task.dir / "prompt.txt"
    elif custom:
        template_path = campaign.workdir / custom
    else:
        template_path = BUILTIN_PROMPT
    return string.Template(template_path.read_text(encoding="utf-8")).safe_substitute(
        model=model_source,
        benchmark=task.benchmark,
        task=task.name,
        num_hours=cell.hours,
        num_gpus=cell.num_gpus,
        gpu_info=gpu_info,
        datetime=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    )


def prepare_job_dir(tmp_root: Path, cell: Cell, agent: AgentSpec, task: TaskSpec, prompt: str) -> JobDir:
    """Copy everything the agent may see into a fresh scratch dir.

    solve.sh and payload/ are COPIED, so replacing the checkout's files while the cell
    runs cannot change or kill it (a replaced script once killed two 10-hour jobs).
    """
    try:
        job = JobDir(Path(tempfile.mkdtemp(prefix=f"ptb-{cell.slug}-", dir=tmp_root)))
    except OSError as e:
        raise HarnessError(f"site.tmp_root: cannot create the job dir in {tmp_root} ({e.strerror})") from None
    try:
        shutil.copytree(task.dir, job.task, symlinks=False)
        # evaluate.py's output of an earlier run must never be mistaken for the agent's model
        shutil.rmtree(job.task / FINAL_MODEL, ignore_errors=True)
        shutil.copy2(agent.solve_sh, job.home / "solve.sh")
        if agent.payload is not None:
            shutil.copytree(agent.payload, job.home / "agent", symlinks=False)
        job.tmp.mkdir()
        job.harness.mkdir()
        atomic_write_text(job.home / "prompt.txt", prompt)
    except (OSError, shutil.Error) as e:
        shutil.rmtree(job.root, ignore_errors=True)  # a half-copied job dir helps nobody
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)[:200]
        if isinstance(e, shutil.Error) and "No space left" in str(e):
            why = "No space left on device"
        raise HarnessError(f"site.tmp_root: preparing the job dir in {tmp_root} failed ({why})") from None
    return job


def write_timer(job: JobDir, deadline: float) -> None:
    """HOME/timer.sh: the agent's clock, counting down to the fixed deadline."""
    (job.home / "timer.sh").write_text(_TIMER.format(deadline=int(deadline), deadline_iso=iso_utc(deadline)))


def scratch_filled(job_root: Path) -> str | None:
    """'the agent filled its scratch (N GB)' when the job dir's filesystem has (almost)
    no room left after the agent (under 64 MiB, or 2% on a small one): an agent outcome,
    not a harness failure."""
    try:
        st = os.statvfs(job_root)
    except OSError:
        return None
    if st.f_bavail * st.f_frsize >= min(64 * 2**20, 0.02 * st.f_blocks * st.f_frsize):
        return None
    used = 0
    for dirpath, _dirs, names in os.walk(job_root):
        for n in names:
            with contextlib.suppress(OSError):
                used += os.lstat(os.path.join(dirpath, n)).st_blocks * 512
    return f"the agent filled its scratch ({used / 1e9:.2f} GB)"
