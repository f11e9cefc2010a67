"""`ptb-harness prefetch`: fill the site's shared HF cache with what a campaign's scoring
reads, on a machine with internet (a login node), so jobs can run offline.

Base models given as repo ids are downloaded with huggingface_hub, and the repos model
entries take their chat template from (``chat_template_from``) with their template files
only (tokenizer_config.json, chat_template.jinja, additional_chat_templates/). Each task's data is
fetched by building the task itself (ptb_scorer.tasks), online, in a child process whose
HF variables name the site's cache exactly as a sandbox does: the same loading code, the
same ids, configs and pinned revisions (inspect_evals' own), so the scorer later finds
exactly what it reads. Gated data (gpqamain's Idavidrein/gpqa) needs HF_TOKEN set here;
its value is passed to the child by environment only. Ends with the plan's own cache
check, naming whatever is still missing in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.scoring import missing_data, template_repos, templated_tasks
from ptb_harness.core.errors import HarnessError
from ptb_scorer.data import CacheLayout

_BUILD_TASK = "import sys; from ptb_scorer.tasks import TASKS; TASKS[sys.argv[1]].build()"
# a graded task's data: plain downloads (`file` datasets) to their place under the HF home
_FETCH_FILES = (
    "import json, sys; from ptb_scorer.data import CacheLayout, fetch_file; layout = CacheLayout.from_env()\n"
    "for spec in json.loads(sys.argv[1]): print(fetch_file(spec, layout))"
)
_DOWNLOAD_MODEL = "import sys; from huggingface_hub import snapshot_download; print(snapshot_download(sys.argv[1]))"
#: what transformers reads a chat template from (ptb_scorer.chat_template.model_templates)
TEMPLATE_FILES = ["tokenizer_config.json", "chat_template.jinja", "additional_chat_templates/*.jinja"]
_DOWNLOAD_TEMPLATE = (
    "import json, sys; from huggingface_hub import snapshot_download\n"
    "print(snapshot_download(sys.argv[1], allow_patterns=json.loads(sys.argv[2])))"
)


def cache_env(layout: CacheLayout, base: dict[str, str] | None = None, offline: bool = False) -> dict[str, str]:
    """The child's environment: the site cache under every name the libraries read."""
    env = {k: v for k, v in (base if base is not None else os.environ).items() if not k.startswith("HF_")}
    env.update(
        HF_HOME=str(layout.hf_home),
        HF_HUB_CACHE=str(layout.hub),
        HUGGINGFACE_HUB_CACHE=str(layout.hub),
        HF_DATASETS_CACHE=str(layout.datasets),
        INSPECT_EVALS_CACHE_DIR=str(layout.inspect_evals),
        PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")]),
    )
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        if (base if base is not None else os.environ).get(name):
            env[name] = (base if base is not None else os.environ)[name]
    if offline:
        env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    return env


def prefetch_steps(campaign: Campaign) -> list[tuple[str, list[str]]]:
    """(what, argv) of each download, in order: models, template repos, then every task with data."""
    steps = [
        (f"model {m.repo_id}", [sys.executable, "-c", _DOWNLOAD_MODEL, str(m.repo_id)])
        for m in campaign.models.values()
        if m.repo_id
    ]
    if templated_tasks(campaign):
        steps += [
            (f"chat template {r}", [sys.executable, "-c", _DOWNLOAD_TEMPLATE, r, json.dumps(TEMPLATE_FILES)])
            for r in template_repos(campaign)
        ]
    for name in campaign.tasks:
        datasets = campaign.task(name).datasets
        files = [d for d in datasets if d["kind"] == "file"]
        if files:
            steps.append((f"task {name} files", [sys.executable, "-c", _FETCH_FILES, json.dumps(files)]))
        if len(files) < len(datasets):
            steps.append((f"task {name}", [sys.executable, "-c", _BUILD_TASK, name]))
    return steps


def prefetch(
    campaign: Campaign, *, dry_run: bool = False, offline: bool = False, say: Callable[[str], None] = print
) -> list[str]:
    """Download what is missing; returns what is still missing afterwards (empty = done)."""
    hf_home = campaign.settings.site.hf_cache.home
    if not hf_home:
        raise HarnessError("site.hf_home is not set: name the shared HF cache in the profile's site.yaml")
    layout = CacheLayout.under(Path(hf_home))
    if dry_run:
        return missing_data(campaign)
    layout.hf_home.mkdir(parents=True, exist_ok=True)
    env = cache_env(layout, offline=offline)
    for what, argv in prefetch_steps(campaign):
        say(f"prefetch {what} -> {layout.hf_home}")
        res = subprocess.run(argv, env=env, capture_output=True, text=True)
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or ["?"])[-1][:300]
            say(f"prefetch {what} FAILED: {last}")
    return missing_data(campaign)
