"""The campaign's settings as typed, frozen objects (built once from the validated config
by ``campaign.reader``, the one module that reads the configuration mapping). Everything
else is handed these, so a knob is followed from the schema to its use through one
attribute. The lower layers declare the settings they need themselves (the sandbox's
``RuntimeSettings``, the HF cache's ``HfCacheSettings``, ``AgentLimits``, the gateway's
``Limits``).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptb_harness.gateway.meter import Limits
from ptb_harness.gateway.prices import ModelPrice
from ptb_harness.judging.verdict import COUNTABLE_VERDICTS, PTB_LOOKUP
from ptb_harness.runtime.hf_cache import HfCacheSettings
from ptb_harness.runtime.limits import AgentLimits
from ptb_harness.runtime.sandbox_settings import RuntimeSettings
from ptb_scorer.llm_client import Endpoint

if TYPE_CHECKING:  # made on use (see GpuSettings)
    from ptb_harness.gpu.cellset import GpuAssignment
    from ptb_harness.gpu.reap import ReapPolicy


@dataclass(frozen=True)
class Resources:
    """Memory, scratch disk and CPUs of one stage's jobs (site.<stage>_resources)."""

    mem_mb: int
    disk_mb: int
    cpus: int


@dataclass(frozen=True)
class JobSizing:
    """What solve and evaluate jobs ask the scheduler for, beyond the cell's own budget."""

    slurm_gpu_style: str
    solve_overhead_minutes: float
    evaluate_runtime_minutes: float
    solve: Resources
    evaluate: Resources

    def resources(self, stage: str) -> Resources:
        return self.solve if stage == "solve" else self.evaluate


@dataclass(frozen=True)
class GpuSettings:
    """How jobs get their GPUs, how leftovers are reaped, how the cards are watched.

    The GPU layer's own objects (``assignment``, ``reap``) are made where they are used,
    so reading the settings (status, collect, planning) never loads the GPU modules."""

    ids: str | None
    pool: str | None
    lock_dir: Path | None
    reap_mode: str
    reap_scope: str
    reap_wait_seconds: float
    monitor_interval_seconds: float
    preflight_timeout_seconds: float

    @property
    def assignment(self) -> GpuAssignment:
        """site.gpu_ids, site.gpu_pool, site.gpu_lock_dir."""
        from ptb_harness.gpu.cellset import GpuAssignment

        return GpuAssignment(self.ids, self.pool, self.lock_dir)

    @property
    def reap(self) -> ReapPolicy:
        """site.gpu_reap, site.gpu_scope, site.reap_wait_seconds as one reap policy."""
        from ptb_harness.gpu.reap import ReapPolicy

        return ReapPolicy(self.reap_mode, self.reap_scope, self.reap_wait_seconds)


@dataclass(frozen=True)
class Site:
    """The profile's site knobs (site.yaml)."""

    name: str
    runtime: RuntimeSettings
    hf_cache: HfCacheSettings
    gpu: GpuSettings
    #: scratch root for job dirs, resolved once (site.tmp_root, else the system temp dir)
    tmp_root: Path
    min_tmp_free_gb: float
    keep_job_dir: bool
    jobs: JobSizing
    #: the agent's files kept beside the cell for the judge: at most this many bytes
    agent_files_max_bytes: int
    #: the most a cell's final_model may hold (site.final_model_max_gb)
    final_model_max_bytes: int
    #: the most of an agent's output its raw trace keeps (site.trace_max_mb)
    trace_max_bytes: int
    #: the caps of each cell's agent (site.agent_limits)
    agent_limits: AgentLimits
    #: the most files a final_model may hold (site.final_model_max_files)
    final_model_max_files: int
    #: the most of the agent's own files walked to keep them (site.agent_files_max_files)
    agent_files_max_files: int
    #: the evidence recorder: its walk's interval, what it decodes of one file and of a solve
    evidence_scan_seconds: float
    evidence_file_max_bytes: int
    evidence_max_bytes: int
    #: its memory cap (site.evidence_memory_mb)
    evidence_memory_max_bytes: int

    def record(self) -> dict[str, Any]:
        """The knobs that change results, for the records of what ran."""
        return {
            "name": self.name,
            "runtime": self.runtime.runtime,
            "gpu_reap": self.gpu.reap_mode,
            "gpu_scope": self.gpu.reap_scope,
            "hf_cache_mode": self.hf_cache.mode,
        }

    def scratch_problem(self) -> str | None:
        """Why tmp_root cannot take a job dir now (missing, or below min_tmp_free_gb), or None.
        The one free-space check: solve refuses to start on it, doctor reports it."""
        try:
            free = shutil.disk_usage(self.tmp_root).free
        except OSError as e:
            return f"cannot use {self.tmp_root} ({e.strerror})"
        if free < self.min_tmp_free_gb * 1e9:
            return f"{self.tmp_root} has {free / 1e9:.2f} GB free, below site.min_tmp_free_gb={self.min_tmp_free_gb}"
        return None


@dataclass(frozen=True)
class SolveSettings:
    timeout_margin_minutes: float
    kill_grace_seconds: float
    #: entries with reprompt: the CLI's session is resumed with at least this much time left
    reprompt_min_minutes: float
    #: as configured (relative to the working directory), or None for the built-in one
    prompt_template: str | None
    #: each cell's LLM budget (an entry's llm_budget replaces the keys it names)
    llm_budget: Limits
    #: USD per million tokens by model, before the genai-prices table
    llm_prices: Mapping[str, ModelPrice]
    llm_log_max_body_kb: int

    def record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def time_limit_s(self, budget_s: float) -> float:
        """When the agent is stopped: its budget plus the margin to save its model."""
        return budget_s + 60 * float(self.timeout_margin_minutes)


@dataclass(frozen=True)
class EvaluateSettings:
    #: one attempt's wall-clock limit per seed it runs (a task's info.json may set its own)
    attempt_timeout_hours: float
    #: the final evaluation's seeds, in order (the first gates the others)
    seeds: tuple[int, ...]
    #: the attention kernels the transformers backend may use on a GPU (ptb_scorer.engine.SDPA_KERNELS)
    sdpa_kernels: tuple[str, ...] = ("flash", "efficient", "math")

    def record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class LeaderboardSettings:
    """How the leaderboard weighs tasks and counts cells (campaign key leaderboard): a
    preset's values (``campaign.rules``) with the campaign's changes applied."""

    #: the preset the values start from: ptb-v1.2, ptb-v1.0 or custom
    rules: str = "custom"
    #: equal, explicit (``weights``) or inverse_gap (``instruct_scores`` and the base agent's cells)
    weighting: str = "equal"
    weights: Mapping[str, float] = dataclasses.field(default_factory=dict)
    base_agent: str = "noop"
    instruct_scores: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    #: what an agent_failed or flagged cell counts as: empty, or the base model's score
    missing: str = "empty"
    #: the tasks of the weighted average (None: every task of the campaign)
    average_tasks: tuple[str, ...] | None = None
    #: the verdicts that count (judging.verdict.COUNTABLE_VERDICTS)
    judges: tuple[str, ...] = COUNTABLE_VERDICTS
    #: a scored cell of a judged campaign without a required verdict: flagged, or drop_entry
    missing_verdict: str = "flagged"
    #: the keys the campaign set to another value than the preset's, and that value as shown
    changed: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def in_average(self, tasks: Iterable[str]) -> list[str]:
        """The tasks, of those given, that the weighted average is over (in their order)."""
        return [t for t in tasks if self.average_tasks is None or t in self.average_tasks]

    @property
    def holds_ptb_lookup(self) -> bool:
        """A counted PTB-lookup flag leaves the entry unranked."""
        return PTB_LOOKUP in self.judges


@dataclass(frozen=True)
class JudgeSettings:
    """The judges (campaign key judge): contamination (with the model identity), API usage,
    PTB lookup and general anomaly, on one endpoint."""

    enabled: bool
    #: the judge model's endpoint; None while the judge is off
    endpoint: Endpoint | None
    ngram_n: int
    sample_overlap: float
    max_contaminated_samples: int
    #: model name -> its instruct variants' repo ids
    instruct_variants: Mapping[str, list[str]]
    max_prompt_chars: int
    #: runs of the contamination judge, and how many of them decide a field (2 of 3)
    contamination_runs: int = 3
    contamination_quorum: int = 2


@dataclass(frozen=True)
class Paths:
    results_dir: Path
    agents_dir: Path
    tasks_dir: Path
    #: results_dir as configured (relative to the working directory, or absolute), so
    #: plans and targets stay readable
    results_dir_text: str

    def results_problem(self) -> str | None:
        """Why results_dir cannot be written (it exists, or can be created), or None.
        The one writability check: planning refuses on it, doctor reports it."""
        existing = self.results_dir
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            return f"cannot create {self.results_dir}: {existing} is not a directory"
        if not os.access(existing, os.W_OK | os.X_OK):
            return f"{existing} is not writable (needed for {self.results_dir})"
        return None


@dataclass(frozen=True)
class Settings:
    name: str
    site: Site
    solve: SolveSettings
    evaluate: EvaluateSettings
    leaderboard: LeaderboardSettings
    paths: Paths
    #: the grader of graded tasks (campaign keys, then the site's overrides)
    grader: Endpoint
    judge: JudgeSettings
    #: variable name -> the config key naming it, for the grader's and judge's keys: never an agent's
    grader_key_names: Mapping[str, str]
