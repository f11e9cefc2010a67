"""The campaign's settings as typed, frozen objects, built once from the validated config.

This is the one module that reads the configuration mapping (``config[...]``,
``site[...]``); everything else is handed the objects below, so a knob is followed from
the schema to its use through one attribute. The lower layers declare the settings they
need themselves (the sandbox's ``RuntimeSettings``, the HF cache's ``HfCacheSettings``)
and this module fills them in. It also holds the semantic checks the JSON schema cannot
express, which read the same mapping: every problem is one ``ConfigError`` naming the key.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ptb_harness.campaign.agents import AgentEntry, parse_agent_entries
from ptb_harness.campaign.cells import Campaign, Model, check_name, format_hours, load_campaign_file
from ptb_harness.core.errors import ConfigError
from ptb_harness.gateway.meter import Limits
from ptb_harness.gateway.prices import ModelPrice
from ptb_harness.runtime.hf_cache import HfCacheSettings
from ptb_harness.runtime.limits import AgentLimits, MiB, default_memory_mb
from ptb_harness.runtime.sandbox_settings import Bind, RuntimeSettings
from ptb_harness.runtime.snapshot import frozen_dir
from ptb_scorer.llm_client import Endpoint, LLMConfigError

T = TypeVar("T")

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
    llm_budget: Limits = Limits()
    #: USD per million tokens by model, before the genai-prices table
    llm_prices: Mapping[str, ModelPrice] = dataclasses.field(default_factory=dict)
    llm_log_max_body_kb: int = 64

    def record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def time_limit_s(self, budget_s: float) -> float:
        """When the agent is stopped: its budget plus the margin to save its model."""
        return budget_s + 60 * float(self.timeout_margin_minutes)


@dataclass(frozen=True)
class EvaluateSettings:
    attempt_timeout_minutes: float

    def record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class LeaderboardSettings:
    weighting: str
    weights: Mapping[str, float]
    base_agent: str
    instruct_scores: Mapping[str, Mapping[str, float]]
    #: what an agent_failed cell counts as: empty, or the base model's score
    missing: str


@dataclass(frozen=True)
class JudgeSettings:
    """The contamination / disallowed-use judge (campaign key judge)."""

    enabled: bool
    #: the judge model's endpoint; None while the judge is off
    endpoint: Endpoint | None
    ngram_n: int
    sample_overlap: float
    max_contaminated_samples: int
    #: model name -> its instruct variants' repo ids
    instruct_variants: Mapping[str, list[str]]
    max_prompt_chars: int


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


# -- building ---------------------------------------------------------------------------


Role = Literal["grader", "judge"]
#: site.grader_endpoint keys that override the campaign's (where the endpoint is, not what it is)
SITE_OVERRIDES = ("base_url", "api_key_env", "concurrency", "timeout_seconds")


def endpoint_for(config: Mapping[str, Any], role: Role) -> Endpoint:
    """The grader's (role grader) or the judge's endpoint: the campaign's keys, then the
    site's overrides. The config is schema-validated, so defaults are filled in."""
    data = dict(config["grader"] if role == "grader" else config["judge"]["endpoint"])
    site = (config.get("site") or {}).get("grader_endpoint") or {}
    data.update({k: site[k] for k in SITE_OVERRIDES if site.get(k) is not None})
    where = "grader" if role == "grader" else "judge.endpoint"
    try:
        return Endpoint.from_dict(data, where)
    except LLMConfigError as e:
        raise ConfigError(str(e)) from None


def grader_key_names(config: Mapping[str, Any]) -> dict[str, str]:
    """Variable name -> the config key that names it, for the variables that hold grader
    and judge keys: never an agent's."""
    names = {}
    if config["judge"]["enabled"]:
        names[endpoint_for(config, "judge").api_key_env] = "judge.endpoint.api_key_env"
    names[endpoint_for(config, "grader").api_key_env] = "grader.api_key_env"
    return {n: key for n, key in names.items() if n}


def _pick(cls: type[T], mapping: Mapping[str, Any], **given: Any) -> T:
    """``cls`` with each field the mapping's key of the same name (the schema's key), but
    the ``given`` ones."""
    names = [f.name for f in dataclasses.fields(cls)]
    return cls(**{n: mapping[n] for n in names if n not in given}, **given)


def site_settings(site: Mapping[str, Any]) -> Site:
    """The typed site from a schema-validated ``site`` mapping (defaults filled in)."""
    binds = tuple(Bind(Path(b["src"]), b.get("dst", b["src"]), b.get("read_only", False)) for b in site["binds"])
    limits = agent_limits(site)
    shm_mb = site["agent_limits"]["shm_mb"]
    shm_bytes = shm_mb * MiB if shm_mb is not None else limits.memory_bytes // 2
    runtime = _pick(RuntimeSettings, site, binds=binds, shm_bytes=shm_bytes)
    hf_home = site["hf_home"]
    lock_dir = site["gpu_lock_dir"]
    gpu = GpuSettings(
        ids=site["gpu_ids"],
        pool=site["gpu_pool"],
        lock_dir=Path(lock_dir) if lock_dir else None,
        reap_mode=site["gpu_reap"],
        reap_scope=site["gpu_scope"],
        reap_wait_seconds=float(site["reap_wait_seconds"]),
        monitor_interval_seconds=float(site["monitor_interval_seconds"]),
        preflight_timeout_seconds=float(site["preflight_timeout_seconds"]),
    )
    jobs = _pick(
        JobSizing,
        site,
        solve=_pick(Resources, site["solve_resources"]),
        evaluate=_pick(Resources, site["evaluate_resources"]),
    )
    return Site(
        name=site["name"],
        runtime=runtime,
        hf_cache=HfCacheSettings(Path(hf_home) if hf_home else None, site["hf_cache_mode"]),
        gpu=gpu,
        tmp_root=Path(site["tmp_root"] or tempfile.gettempdir()),
        min_tmp_free_gb=site["min_tmp_free_gb"],
        keep_job_dir=site["keep_job_dir"],
        jobs=jobs,
        agent_files_max_bytes=int(float(site["agent_files_max_mb"]) * 1e6),
        final_model_max_bytes=int(float(site["final_model_max_gb"]) * 1e9),
        trace_max_bytes=int(float(site["trace_max_mb"]) * 2**20),
        agent_limits=limits,
        final_model_max_files=site["final_model_max_files"],
        agent_files_max_files=site["agent_files_max_files"],
    )


def agent_limits(site: Mapping[str, Any]) -> AgentLimits:
    """site.agent_limits with its null defaults resolved from the solve job's resources."""
    knobs, job = site["agent_limits"], site["solve_resources"]
    memory_mb = knobs["memory_mb"] if knobs["memory_mb"] is not None else default_memory_mb(job["mem_mb"])
    file_max_gb = knobs["file_max_gb"]
    fsize = int(float(file_max_gb) * 1e9) if file_max_gb is not None else job["disk_mb"] * 10**6 or None
    return AgentLimits(
        memory_bytes=memory_mb * MiB,
        pids_max=knobs["pids_max"],
        nofile=knobs["nofile"],
        fsize_bytes=fsize,
        cgroup=knobs["cgroup"],
        cgroup_parent=knobs["cgroup_parent"],
    )


def build_settings(config: Mapping[str, Any], workdir: Path) -> Settings:
    """The typed settings of a schema-validated config (defaults filled in)."""
    paths = config["paths"]
    return Settings(
        name=config["name"],
        site=site_settings(config["site"]),
        solve=_pick(
            SolveSettings,
            config["solve"],
            llm_budget=Limits(**config["solve"]["llm_budget"]),
            llm_prices={m: ModelPrice(**p) for m, p in config["solve"]["llm_prices"].items()},
        ),
        evaluate=_pick(EvaluateSettings, config["evaluate"]),
        leaderboard=_pick(LeaderboardSettings, config["leaderboard"]),
        paths=Paths(
            results_dir=(workdir / paths["results_dir"]).resolve(),
            # under `ptb-harness run`, the snapshot's frozen copies (a scorer patched in
            # the checkout meanwhile is not the one that runs)
            agents_dir=frozen_dir((workdir / paths["agents_dir"]).resolve(), workdir.resolve()),
            tasks_dir=frozen_dir((workdir / paths["tasks_dir"]).resolve(), workdir.resolve()),
            results_dir_text=paths["results_dir"],
        ),
        grader=endpoint_for(config, "grader"),
        judge=_judge_settings(config),
        grader_key_names=grader_key_names(config),
    )


def _judge_settings(config: Mapping[str, Any]) -> JudgeSettings:
    judge = config["judge"]
    return _pick(JudgeSettings, judge, endpoint=endpoint_for(config, "judge") if judge["enabled"] else None)


def campaign_from_config(config: Mapping[str, Any], workdir: str | Path) -> Campaign:
    """The campaign of a schema-validated config, without the semantic checks: for a job
    of a campaign the Snakefile has checked already."""
    workdir = Path(workdir)
    return Campaign(
        workdir=workdir,
        settings=build_settings(config, workdir),
        agent_entries={e.name: e for e in _agent_entries(config)},
        tasks=tuple(config["tasks"]),
        models={m["name"]: Model(m["name"], m.get("path"), m.get("repo_id")) for m in config["models"]},
        hours=tuple(format_hours(h) for h in config["hours"]),
        num_gpus=tuple(int(g) for g in config["num_gpus"]),
        runs=tuple(int(r) for r in config["runs"]),
    )


def _agent_entries(config: Mapping[str, Any]) -> list[AgentEntry]:
    return parse_agent_entries(_nonempty_list(config, "agents"), config.get("agent_config") or {}, check_name)


def merge_campaign_file(config: dict[str, Any]) -> None:
    """Replace campaign keys with those of ``config['campaign']`` when one is named."""
    path = config.get("campaign")
    if path:
        config.update(load_campaign_file(path))


# -- semantic checks ----------------------------------------------------------------------


def _check_unique(values: list[Any], key: str) -> None:
    seen: dict[Any, int] = {}
    for i, v in enumerate(values):
        if v in seen:
            raise ConfigError(f"{key}[{i}]: duplicate entry {v!r} (also at {key}[{seen[v]}])")
        seen[v] = i


def _nonempty_list(config: Mapping[str, Any], key: str) -> list[Any]:
    values = config.get(key)
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{key}: must be a non-empty list")
    return values


def _check_models(config: Mapping[str, Any]) -> None:
    models = _nonempty_list(config, "models")
    for i, m in enumerate(models):
        if not isinstance(m, dict):
            raise ConfigError(f"models[{i}]: must be a mapping with 'name' and 'path' or 'repo_id'")
        check_name(m.get("name"), f"models[{i}].name")
        if ("path" in m) == ("repo_id" in m):
            raise ConfigError(f"models[{i}]: give exactly one of 'path' (local directory) or 'repo_id'")
    _check_unique([m["name"] for m in models], "models[].name")


def _check_grid(config: Mapping[str, Any]) -> None:
    tasks = _nonempty_list(config, "tasks")
    for i, v in enumerate(tasks):
        check_name(v, f"tasks[{i}]")
    _check_unique(tasks, "tasks")
    _agent_entries(config)
    _check_models(config)
    hours = _nonempty_list(config, "hours")
    canonical = [format_hours(h, f"hours[{i}]") for i, h in enumerate(hours)]
    _check_unique(canonical, "hours")
    for key in ("num_gpus", "runs"):
        values = _nonempty_list(config, key)
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"{key}[{i}]: {v!r} is not a non-negative integer")
        _check_unique(values, key)


def check_campaign(config: Mapping[str, Any], workdir: Path) -> Campaign:
    """Semantic checks the JSON schema cannot express, then the campaign with every agent
    and task loaded (once: the stages take them from the campaign). Raises ConfigError
    naming the key."""
    _check_grid(config)
    campaign = campaign_from_config(config, workdir)
    for i, entry in enumerate(campaign.agent_entries.values()):
        try:
            spec = campaign.agent(entry.name)
        except ConfigError as e:
            raise ConfigError(f"agents[{i}]: {e}") from None
        if entry.reprompt and not spec.resume:
            raise ConfigError(
                f"agents[{i}].reprompt: agent directory {entry.dir} cannot resume its CLI's session"
                ' (its agent.json does not say "resume": true)'
            )
    for i, task in enumerate(campaign.tasks):
        try:
            campaign.task(task)
        except ConfigError as e:
            raise ConfigError(f"tasks[{i}]: {e}") from None
    template = campaign.settings.solve.prompt_template
    if template and not (campaign.workdir / template).is_file():
        raise ConfigError(f"solve.prompt_template: file {campaign.workdir / template} not found")
    for agent in config.get("agent_config") or {}:
        if agent not in campaign.agent_entries:
            raise ConfigError(f"agent_config.{agent}: not an agent of this campaign")
    _check_leaderboard(campaign)
    return campaign


def _check_leaderboard(campaign: Campaign) -> None:
    board, tasks = campaign.settings.leaderboard, campaign.tasks
    for key, entries in (("weights", board.weights), ("instruct_scores", board.instruct_scores)):
        for task in entries:
            if task not in tasks:
                raise ConfigError(f"leaderboard.{key}.{task}: not a task of this campaign")
    if board.weighting == "explicit":
        missing = [t for t in tasks if t not in board.weights]
        if missing:
            raise ConfigError(f"leaderboard.weights: no weight for task(s) {', '.join(missing)} (weighting explicit)")
        if not sum(board.weights.values()) > 0:
            raise ConfigError("leaderboard.weights: the weights sum to 0")
    if board.weighting == "inverse_gap":
        _check_inverse_gap(campaign)


def _check_inverse_gap(campaign: Campaign) -> None:
    """inverse_gap needs every task's and model's instruct score, and the base agent's cells."""
    board = campaign.settings.leaderboard
    for task in campaign.tasks:
        missing = [m for m in campaign.models if m not in (board.instruct_scores.get(task) or {})]
        if missing:
            raise ConfigError(
                f"leaderboard.instruct_scores.{task}: no score for model(s) {', '.join(missing)} "
                "(weighting inverse_gap needs every task and model)"
            )
    if board.base_agent not in campaign.agent_entries:
        raise ConfigError(
            f"leaderboard.base_agent: {board.base_agent!r} is not an agent of this campaign "
            "(weighting inverse_gap needs the base models' scores)"
        )
