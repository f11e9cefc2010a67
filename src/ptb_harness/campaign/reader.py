"""The one reader of the configuration mapping: a schema-validated config (defaults
filled in by ``core.schema``) in, the typed ``Campaign`` and its ``Settings`` out. Its grid
(names, lists, models, the agents' entries) is checked on the way, every problem one
``ConfigError`` naming the key; what needs the agents', tasks' or cache's files is
``campaign.checks``. Nothing else reads ``config[...]`` or ``site[...]``
(``tests/test_layers.py``).
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from ptb_harness.campaign.agents import AgentEntry, parse_agent_entries
from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import Model, TemplateFrom, check_name, format_hours
from ptb_harness.campaign.rules import rules_settings
from ptb_harness.campaign.settings import (
    EvaluateSettings,
    GpuSettings,
    JobSizing,
    JudgeSettings,
    LeaderboardSettings,
    Paths,
    Resources,
    Settings,
    Site,
    SolveSettings,
)
from ptb_harness.core.errors import ConfigError
from ptb_harness.core.records import read_yaml_mapping
from ptb_harness.gateway.meter import Limits
from ptb_harness.gateway.prices import ModelPrice
from ptb_harness.runtime.hf_cache import HfCacheSettings
from ptb_harness.runtime.limits import AgentLimits, MiB, default_memory_mb
from ptb_harness.runtime.sandbox_settings import Bind, RuntimeSettings
from ptb_harness.runtime.snapshot import frozen_dir
from ptb_scorer.chat_template import RESERVED_KWARGS
from ptb_scorer.llm_client import Endpoint, LLMConfigError

T = TypeVar("T")

# Keys of a campaign file: every top-level key of the schema except `site` (site knobs come
# from profiles) and `campaign` (the file's own name); tests/unit/test_campaign.py checks it.
CAMPAIGN_KEYS = frozenset(
    {
        "agents",
        "tasks",
        "models",
        "hours",
        "num_gpus",
        "runs",
        "agent_config",
        "solve",
        "evaluate",
        "paths",
        "name",
        "grader",
        "judge",
        "leaderboard",
    }
)


def load_campaign_file(path: str | Path) -> dict[str, Any]:
    """Read a campaign file given with ``--config campaign=FILE``.

    A campaign file holds only campaign keys: site knobs belong to profiles, and a
    campaign file that set them would silently override the site.
    """
    p = Path(path)
    data = read_yaml_mapping(p, "campaign")
    unknown = sorted(set(data) - CAMPAIGN_KEYS)
    if unknown:
        raise ConfigError(
            f"campaign: {p} sets {', '.join(unknown)}, which are not campaign keys"
            f" (allowed: {', '.join(sorted(CAMPAIGN_KEYS))}; site knobs belong in the profile)"
        )
    return data


def merge_campaign_file(config: dict[str, Any]) -> None:
    """Replace campaign keys with those of ``config['campaign']`` when one is named."""
    path = config.get("campaign")
    if path:
        config.update(load_campaign_file(path))


# -- the campaign and its settings ---------------------------------------------------------


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
        evidence_scan_seconds=float(site["evidence_scan_seconds"]),
        evidence_file_max_bytes=int(float(site["evidence_file_max_mb"]) * 1e6),
        evidence_max_bytes=int(float(site["evidence_max_gb"]) * 1e9),
        evidence_memory_max_bytes=site["evidence_memory_mb"] * MiB,
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
        evaluate=_pick(
            EvaluateSettings,
            config["evaluate"],
            seeds=tuple(config["evaluate"]["seeds"]),
            sdpa_kernels=tuple(config["evaluate"]["sdpa_kernels"]),
        ),
        leaderboard=leaderboard_settings(config["leaderboard"], judged=config["judge"]["enabled"]),
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


def leaderboard_settings(board: Mapping[str, Any], judged: bool = True) -> LeaderboardSettings:
    """The typed `leaderboard:` of a schema-validated config (defaults filled in): its
    preset (`rules`) with the keys it sets (not null) replacing the preset's. A
    PostTrainBench preset without the judges (judge.enabled false) applies no verdict,
    and the tables' rules line says so."""
    settings = rules_settings(**board)
    if judged or settings.rules == "custom":
        return settings
    return dataclasses.replace(settings, changed={**settings.changed, "judges": "none ran (judge.enabled is false)"})


def campaign_from_config(config: Mapping[str, Any], workdir: str | Path) -> Campaign:
    """The campaign of a schema-validated config, its grid checked (names, lists, models,
    agent entries), without the checks that read agents, tasks or the cache
    (``campaign.checks``): for a job of a campaign the Snakefile has checked already."""
    _check_grid(config)
    workdir = Path(workdir)
    return Campaign(
        workdir=workdir,
        settings=build_settings(config, workdir),
        agent_entries={e.name: e for e in _agent_entries(config)},
        tasks=tuple(config["tasks"]),
        models={m["name"]: _model(m) for m in config["models"]},
        hours=tuple(format_hours(h) for h in config["hours"]),
        num_gpus=tuple(int(g) for g in config["num_gpus"]),
        runs=tuple(int(r) for r in config["runs"]),
    )


def _model(entry: Mapping[str, Any]) -> Model:
    """A models[] entry (schema-validated; its defaults filled in)."""
    source = entry.get("chat_template_from")
    return Model(
        entry["name"],
        entry.get("path"),
        entry.get("repo_id"),
        chat_template_from=TemplateFrom(source.get("path"), source.get("repo_id")) if source else None,
        chat_template_kwargs=dict(entry.get("chat_template_kwargs") or {}),
    )


def _agent_entries(config: Mapping[str, Any]) -> list[AgentEntry]:
    models_by_agent = config.get("agent_config") or {}
    entries = parse_agent_entries(_nonempty_list(config, "agents"), models_by_agent)
    names = {e.name for e in entries}
    for agent in models_by_agent:
        if agent not in names:
            raise ConfigError(f"agent_config.{agent}: not an agent of this campaign")
    return entries


# -- the grid -------------------------------------------------------------------------------


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
        for name in m.get("chat_template_kwargs") or {}:
            if name in RESERVED_KWARGS:
                key = f"models[{i}].chat_template_kwargs.{name}"
                raise ConfigError(f"{key}: an argument of apply_chat_template, not a template variable")
    _check_unique([m["name"] for m in models], "models[].name")


def _check_grid(config: Mapping[str, Any]) -> None:
    """Names, lists and models of the grid, before anything is built from them."""
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
