"""What scoring a campaign reads besides the final model: the base model's config.json
(local, or the snapshot of the site's HF cache huggingface_hub loads offline), the chat
templates a task maps architectures to, and what the cache lacks of the tasks' datasets
and the base models. The plan checks these (``campaign.checks``: ``-n`` too), the evaluate
stage passes the base architecture, the judge reads the same configs. The cache layout
and the per-dataset check are the scorer's own (ptb_scorer.data), so the plan checks
exactly what the scorer will read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.tasks import TaskSpec
from ptb_harness.core.hf_snapshots import resolve_snapshot
from ptb_harness.core.records import MAX_RECORD_BYTES, loads_bounded
from ptb_scorer.data import CacheLayout, describe, missing


def architecture_map(templates_dir: Path) -> dict[str, str]:
    data = json.loads((templates_dir / "architectures.json").read_text())
    return {k: v for k, v in data.items() if not k.startswith("_")}


def cached_config_json(campaign: Campaign, repo_id: str) -> Path | None:
    """config.json of a repo's snapshot in the site's HF cache, the one huggingface_hub
    loads offline (refs/main), or None."""
    hf_home = campaign.settings.site.hf_cache.home
    snap = resolve_snapshot(CacheLayout.under(Path(hf_home)).hub, repo_id) if hf_home else None
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
    return [t for t in (campaign.task(n) for n in campaign.tasks) if t.templates_dir]


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
    return gaps


def _cached(layout: CacheLayout, repo_id: str) -> bool:
    """The snapshot huggingface_hub loads offline is there, with its config.json."""
    snap = resolve_snapshot(layout.hub, repo_id)
    return snap is not None and snap.file("config.json") is not None
