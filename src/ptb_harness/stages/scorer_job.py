"""Where and how the scorer runs for one evaluate run of a cell (``ScorerJob``): a scratch
copy of the task dir, the scorer's sandbox, the cell's GPUs, the HF cache view and the
grader, settled once from the campaign and the environment; every attempt of the ladder
runs in it. ``scorer_job`` holds the GPUs and the copy while the attempts run and
removes the copy after."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.scoring import base_architecture, write_template_bundle
from ptb_harness.campaign.tasks import TaskSpec
from ptb_harness.core.errors import HarnessError
from ptb_harness.core.records import file_sha256, tree_sha256
from ptb_harness.gpu.cellset import GpuSet, job_gpu_set
from ptb_harness.gpu.nvml import load_nvml
from ptb_harness.gpu.reap import ReapPolicy
from ptb_harness.runtime.hf_cache import hf_cache_view
from ptb_harness.runtime.sandbox import Bind, LaunchRequest, Sandbox
from ptb_scorer.chat_template import ChatTemplate
from ptb_scorer.protocol import GRADER_ENV, SDPA_KERNELS_ENV


def evaluate_argv(
    task: TaskSpec,
    model: Path,
    out: Path,
    max_tokens: int | None,
    base_architecture: str | None = None,
    seeds: tuple[int, ...] = (),
    gated: bool = False,
) -> list[str]:
    """evaluate.py's command line, run in (a copy of) the task dir inside the scorer
    sandbox; ``seeds``: the final evaluation's seeds of this attempt (``gated``: the first
    gates the others), each seed's metrics beside ``out`` (ptb_scorer.protocol.seed_output)."""
    argv = ["python", "evaluate.py", "--model-path", str(model), "--json-output-file", str(out)]
    argv += task.extra_args
    if base_architecture is not None:
        argv += ["--base-architecture", base_architecture]
    if max_tokens is not None:
        argv += [task.token_flag, str(max_tokens)]
    if seeds:
        argv += ["--seeds", ",".join(map(str, seeds)), *(["--first-seed-gates"] if gated else [])]
    return argv


def base_architecture_for(campaign: Campaign, cell: Cell, task: TaskSpec) -> str | None:
    """The base model's architecture for ``--base-architecture``; a HarnessError when the
    task needs it and it is unknown (the campaign check could not read it at plan time)."""
    if not task.pass_base_architecture:
        return None
    arch = base_architecture(campaign, cell.model)
    if arch is None:
        raise HarnessError(
            f"base model {campaign.model_source(cell.model)}: no readable config.json (local dir or site.hf_home);"
            " run `ptb-harness prefetch`"
        )
    return arch


@dataclass(frozen=True)
class ScorerJob:
    """What every attempt of one evaluate run shares: where the scorer runs and with what."""

    task: TaskSpec
    sandbox: Sandbox
    #: the scratch dir: the task's copy in home/task, the scorer's TMPDIR in tmp
    work: Path
    gpu_set: GpuSet
    nvml: Any
    hf_view: tuple[Path | None, bool]
    #: a graded task's scorer gets the grader endpoint (no secret) and its key variable by name
    grader_env: Mapping[str, str]
    #: how the scoring engine runs (the attention kernels it may use), set by the campaign
    engine_env: Mapping[str, str]
    pass_names: Sequence[str]
    #: the base model's architecture, for tasks that check the final model's against it
    base_architecture: str | None
    #: sha256 of the evaluate.py that runs (the scratch copy, links followed) and of the whole copy
    evaluate_sha256: str
    task_dir_sha256: str
    #: an attempt's time limit per seed it runs (an attempt without seeds: one)
    timeout_s: float
    #: the site's GPU reap before each attempt, and the GPU monitor's sampling interval
    reap_policy: ReapPolicy
    monitor_interval_s: float
    #: the chat template written into the copy (the base model's), for tasks that render one
    chat_template: ChatTemplate | None = None

    @property
    def home(self) -> Path:
        return self.work / "home"

    @property
    def tmp(self) -> Path:
        return self.work / "tmp"

    def identity(self) -> dict[str, str]:
        """What ran: the scorer and the whole task dir, as copied (a scorer patched in the
        checkout shows here, and in the snapshot's digest under `ptb-harness run`)."""
        return {
            "task_dir": str(self.task.dir),
            "evaluate_py_sha256": self.evaluate_sha256,
            "task_dir_sha256": self.task_dir_sha256,
        }

    def request(
        self, model: Path, out_inside: Path, cap: int | None, seeds: tuple[int, ...] = (), gated: bool = False
    ) -> LaunchRequest:
        """evaluate.py on ``model`` with token cap ``cap`` (and ``seeds``), writing
        ``out_inside`` (its own TMPDIR)."""
        return LaunchRequest(
            role="scorer",
            command=evaluate_argv(self.task, model, out_inside, cap, self.base_architecture, seeds, gated),
            job_home=self.home,
            job_tmp=self.tmp,
            workdir="task",
            # scoring reads only the prefetched cache: a compute node may have no internet
            env={**self.grader_env, **self.engine_env, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
            pass_names=self.pass_names,
            gpus=self.gpu_set.sandbox_ids(),
            # final_model at its own absolute path, read-only, wherever the results are; the
            # cell dir (solve.json, the other records) is out of the scorer's sight
            binds=[Bind(model, str(model), read_only=True)],
            hf_home_host=self.hf_view[0],
            hf_read_only=self.hf_view[1],
        )

    def versions_request(self, command: list[str]) -> LaunchRequest:
        """``command`` (the package-versions probe) in the scorer's sandbox, without the grader."""
        return LaunchRequest(
            role="scorer",
            command=command,
            job_home=self.home,
            job_tmp=self.tmp,
            workdir="task",
            env={},
            gpus=self.gpu_set.sandbox_ids(),
            hf_read_only=True,
        )


@contextlib.contextmanager
def scorer_job(
    campaign: Campaign, cell: Cell, task: TaskSpec, host_env: Mapping[str, str], base_arch: str | None
) -> Iterator[ScorerJob]:
    """The scorer job of one evaluate run (``base_arch``: from base_architecture_for).
    The scorer runs in a scratch copy of the task: evaluate.py may write next to itself,
    and a task file replaced in the checkout meanwhile cannot change a running attempt."""
    site = campaign.settings.site
    work = Path(tempfile.mkdtemp(prefix=f"ptb-eval-{cell.slug}-", dir=site.tmp_root))
    sandbox = Sandbox(site.runtime, host_env)
    nvml = load_nvml()
    try:
        with contextlib.ExitStack() as stack:
            gpu_set = stack.enter_context(job_gpu_set(cell.num_gpus, site.gpu.assignment, host_env, nvml))
            copy = work / "home" / "task"
            shutil.copytree(task.dir, copy, symlinks=False)  # links followed (ptb_scorer)
            # the base model's chat template (or the entry's chat_template_from), never final_model's
            chat_template = write_template_bundle(campaign, cell.model, task, copy)
            evaluate_sha256, task_dir_sha256 = file_sha256(copy / "evaluate.py"), tree_sha256(copy)
            (work / "tmp").mkdir()
            grader_env, grader_keys = _grader(campaign, task)
            yield ScorerJob(
                task=task,
                sandbox=sandbox,
                work=work,
                gpu_set=gpu_set,
                nvml=nvml,
                hf_view=stack.enter_context(hf_cache_view(site.hf_cache, work)),
                grader_env=grader_env,
                engine_env={SDPA_KERNELS_ENV: ",".join(campaign.settings.evaluate.sdpa_kernels)},
                pass_names=[*task.required_api_keys, *grader_keys],
                base_architecture=base_arch,
                evaluate_sha256=evaluate_sha256,
                task_dir_sha256=task_dir_sha256,
                timeout_s=(task.attempt_timeout_hours or campaign.settings.evaluate.attempt_timeout_hours) * 3600,
                reap_policy=site.gpu.reap,
                monitor_interval_s=site.gpu.monitor_interval_seconds,
                chat_template=chat_template,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _grader(campaign: Campaign, task: TaskSpec) -> tuple[dict[str, str], list[str]]:
    """A graded task's scorer gets the grader endpoint (no secret) and its key variable by name."""
    if not task.uses_grader:
        return {}, []
    endpoint = campaign.settings.grader
    return {GRADER_ENV: endpoint.to_env()}, [endpoint.api_key_env] if endpoint.api_key_env else []
