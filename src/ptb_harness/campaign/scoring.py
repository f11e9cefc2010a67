"""What scoring a campaign reads besides the final model: the base model's config.json
(local, or the snapshot of the site's HF cache huggingface_hub loads offline), the chat
template each task renders a model's prompts with (the base model's own, or its entry's
``chat_template_from``), and what the cache lacks of the tasks' datasets, the base models
and their template repos. The plan checks these (``campaign.checks``: ``-n`` too), the evaluate
stage passes the base architecture, the judge reads the same configs. The cache layout
and the per-dataset check are the scorer's own (ptb_scorer.data), so the plan checks
exactly what the scorer will read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.tasks import TaskSpec
from ptb_harness.core.errors import ConfigError
from ptb_harness.core.hf_snapshots import Snapshot, resolve_snapshot
from ptb_harness.core.records import MAX_RECORD_BYTES, loads_bounded
from ptb_scorer.chat_template import BUNDLE_FILE, ChatTemplate, Source, TemplateError, choose
from ptb_scorer.data import CacheLayout, describe, missing


def cached_snapshot(campaign: Campaign, repo_id: str) -> Snapshot | None:
    """A repo's snapshot in the site's HF cache, the one huggingface_hub loads offline
    (refs/main), or None."""
    hf_home = campaign.settings.site.hf_cache.home
    return resolve_snapshot(CacheLayout.under(Path(hf_home)).hub, repo_id) if hf_home else None


def cached_config_json(campaign: Campaign, repo_id: str) -> Path | None:
    """config.json of a repo's snapshot in the site's HF cache (cached_snapshot), or None."""
    snap = cached_snapshot(campaign, repo_id)
    return snap.file("config.json") if snap else None


def base_config_json(campaign: Campaign, model: str) -> Path | None:
    """The base model's config.json: in its local dir, or in the site's HF cache."""
    m = campaign.models[model]
    if m.path is not None:
        return Path(campaign.model_source(model)) / "config.json"
    return cached_config_json(campaign, str(m.repo_id))


def model_config_json(campaign: Campaign, ref: str) -> Path | None:
    """config.json of a model named as a local dir (relative to the working directory) or
    as a repo id in the site's HF cache (the judge's instruct variants)."""
    local = campaign.workdir / ref / "config.json"
    return local if local.is_file() else cached_config_json(campaign, ref)


def read_model_config(path: Path | None) -> dict[str, Any] | None:
    """A model's config.json as an object, None when unreadable. A link is followed: a
    hub cache's snapshot files are links into its blobs (the site's cache, not an agent's
    file; the final model's config is read without following any)."""
    if path is None:
        return None
    try:
        with open(path.resolve(), "rb") as f:
            data = f.read(MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    obj, _ = loads_bounded(data) if len(data) <= MAX_RECORD_BYTES else (None, "too big")
    return obj if isinstance(obj, dict) else None


def base_architecture(campaign: Campaign, model: str) -> str | None:
    """The base model's architecture (config.json ``architectures[0]``), None when unreadable."""
    archs = (read_model_config(base_config_json(campaign, model)) or {}).get("architectures")
    return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None


def templated_tasks(campaign: Campaign) -> list[TaskSpec]:
    """The tasks that score a chat model (info.json ``chat_template``)."""
    return [t for t in (campaign.task(n) for n in campaign.tasks) if t.chat_template is not None]


def template_source(campaign: Campaign, model: str) -> Source | None:
    """The directory a model's chat template is read from: its entry's
    ``chat_template_from``, else the base model itself (a repo id: the snapshot
    huggingface_hub loads offline). None while a repo's snapshot is not in the cache
    (the data check names it)."""
    m = campaign.models[model]
    src = m.chat_template_from
    path, repo_id = (src.path, src.repo_id) if src else (m.path, m.repo_id)
    if path is not None:
        return Source((campaign.workdir / path).resolve(), path)
    snap = cached_snapshot(campaign, str(repo_id))
    return Source(snap.path, str(repo_id), snap.commit) if snap else None


def task_template(campaign: Campaign, model: str, task: TaskSpec) -> ChatTemplate | None:
    """The chat template ``task`` renders ``model``'s prompts with (None: the task uses
    none); a ConfigError naming the model entry when there is none to use."""
    if task.chat_template is None:
        return None
    i, m = list(campaign.models).index(model), campaign.models[model]
    src = template_source(campaign, model)
    if src is None:
        what = m.chat_template_from.repo_id if m.chat_template_from else m.repo_id
        raise ConfigError(f"models[{i}] ({model}): {what} is not in the HF cache: run `ptb-harness prefetch`")
    kwargs = {**task.chat_template.kwargs, **m.chat_template_kwargs}
    try:
        return choose(
            src, base_architecture(campaign, model), tool_calling=task.chat_template.tool_calling, kwargs=kwargs
        )
    except TemplateError as e:
        hint = (
            "" if m.chat_template_from else f"; name one with models[{i}].chat_template_from (e.g. the instruct model)"
        )
        raise ConfigError(f"models[{i}] ({model}): task {task.name}: {e}{hint}") from None


def write_template_bundle(campaign: Campaign, model: str, task: TaskSpec, task_copy: Path) -> ChatTemplate | None:
    """The task's chat template for ``model`` into a copy of the task dir (the scorer's,
    or the agent's), where its evaluate.py reads it (ptb_scorer.chat_template.BUNDLE_FILE)."""
    template = task_template(campaign, model, task)
    if template is not None:
        (task_copy / BUNDLE_FILE).write_text(template.to_json(), encoding="utf-8")
    return template


def template_repos(campaign: Campaign) -> list[str]:
    """The repos the model entries take their chat templates from (chat_template_from)."""
    src = [m.chat_template_from for m in campaign.models.values()]
    return sorted({s.repo_id for s in src if s and s.repo_id})


def missing_data(campaign: Campaign) -> list[str]:
    """What the site's HF cache lacks for this campaign (empty when nothing)."""
    readers = [t for t in (campaign.task(n) for n in campaign.tasks) if t.datasets]
    hf_home = campaign.settings.site.hf_cache.home
    if not hf_home:
        if readers:
            return [f"site.hf_home is unset, and tasks {', '.join(t.name for t in readers)} read datasets offline"]
        return []
    layout = CacheLayout.under(Path(hf_home))
    gaps = [f"{t.name}: {describe(d)}" for t in readers for d in t.datasets if missing(d, layout)]
    gaps += [f"model {m.repo_id}" for m in campaign.models.values() if m.repo_id and not _cached(layout, m.repo_id)]
    if templated_tasks(campaign):
        gaps += [f"chat template repo {r}" for r in template_repos(campaign) if not resolve_snapshot(layout.hub, r)]
    return gaps


def _cached(layout: CacheLayout, repo_id: str) -> bool:
    """The snapshot huggingface_hub loads offline is there, with its config.json."""
    snap = resolve_snapshot(layout.hub, repo_id)
    return snap is not None and snap.file("config.json") is not None
