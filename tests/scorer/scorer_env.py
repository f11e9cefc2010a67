"""The scorer tests' offline HF home with every task's fixture rows (tests/scorer_fixtures.py).

Its variables are set only while a test module that asks for ``hf_home`` runs (and restored
after), so no other test sees them. `datasets` and `inspect_evals` read their cache
locations once, at import: the in-process tests import them inside that window.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

HF_HOME = Path(tempfile.gettempdir()) / f"ptb-scorer-hf-{os.getpid()}"
SCORER_ENV = {
    "HF_HOME": str(HF_HOME),
    "HF_HUB_CACHE": str(HF_HOME / "hub"),
    "HUGGINGFACE_HUB_CACHE": str(HF_HOME / "hub"),
    "HF_DATASETS_CACHE": str(HF_HOME / "datasets"),
    "INSPECT_EVALS_CACHE_DIR": str(HF_HOME / "inspect_evals"),
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "INSPECT_LOG_DIR": str(HF_HOME / "inspect-logs"),
}


@pytest.fixture(scope="module")
def hf_home() -> Iterator[Path]:
    from scorer_fixtures import write_fixture_cache

    if not (HF_HOME / "datasets").is_dir():
        write_fixture_cache(HF_HOME)
    saved = {k: os.environ.get(k) for k in SCORER_ENV}
    os.environ.update(SCORER_ENV)
    # another test module may have imported `datasets` already (the judge's tests do), and
    # it read its cache paths then: point them here too, as a fresh import would
    patched = _point_datasets_here() | _point_inspect_evals_here()
    try:
        yield HF_HOME
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for (module, name), value in patched.items():
            setattr(module, name, value)


def _point_datasets_here() -> dict:
    """Set datasets.config's cache paths and offline flag as they would be read from
    SCORER_ENV at import; returns the old values to restore."""
    config = sys.modules.get("datasets.config")
    if config is None:
        return {}
    cache = HF_HOME / "datasets"
    new = {
        "HF_CACHE_HOME": str(HF_HOME),
        "HF_DATASETS_CACHE": cache,
        "DOWNLOADED_DATASETS_PATH": cache / config.DOWNLOADED_DATASETS_DIR,
        "EXTRACTED_DATASETS_PATH": cache / config.DOWNLOADED_DATASETS_DIR / config.EXTRACTED_DATASETS_DIR,
        "HF_HUB_OFFLINE": True,
        "HF_DATASETS_OFFLINE": True,
    }
    old = {(config, name): getattr(config, name) for name in new}
    for name, value in new.items():
        setattr(config, name, value)
    return old


def _point_inspect_evals_here() -> dict:
    """inspect_evals reads INSPECT_EVALS_CACHE_DIR once, when any of its modules is first
    imported, and bfcl fixes its data path from it then: if another test module imported it
    first (the HumanEval tests do), point both at SCORER_ENV's cache, or bfcl would clone
    its data from GitHub into ~/.cache. Returns the old values to restore."""
    cache = Path(SCORER_ENV["INSPECT_EVALS_CACHE_DIR"])
    targets = [
        (sys.modules.get("inspect_evals.constants"), "INSPECT_EVALS_CACHE_PATH", cache),
        (sys.modules.get("inspect_evals.bfcl.bfcl"), "DATASET_LOCATION", cache / "BFCL"),
        (sys.modules.get("inspect_evals.bfcl.bfcl"), "FUNC_SOURCE_LOCATION", cache / "BFCL" / "func_source_code"),
    ]
    old = {(module, name): getattr(module, name) for module, name, _ in targets if module is not None}
    for module, name, value in targets:
        if module is not None:
            setattr(module, name, value)
    return old


def records(log: Path, kind: str) -> list:
    """The stand-in's records of one kind (argv, request, render)."""
    import json

    return [r["data"] for r in map(json.loads, log.read_text().splitlines()) if r["kind"] == kind]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's tiny Llama (LlamaForCausalLM), as a base model that ships a chat template
    (TINY_TEMPLATE: Llama 3's turns) in its chat_template.jinja."""
    from ptb_harness.demo.tiny_model import build_tiny_model

    model = build_tiny_model(tmp_path_factory.mktemp("models") / "tiny")
    (model / "chat_template.jinja").write_text(TINY_TEMPLATE)
    return model


#: the tiny model's chat template as a base model (the demo model itself ships none)
TINY_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
    "{{ m.content }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def write_bundle(task_copy: Path, base: Path, architecture: str, tool_calling: bool = False) -> Path:
    """The chat template bundle the harness's evaluate stage writes into its copy of a task
    (ptb_harness.campaign.scoring.write_template_bundle), from a base model dir."""
    from ptb_scorer.chat_template import BUNDLE_FILE, Source, choose

    path = Path(task_copy) / BUNDLE_FILE
    path.write_text(choose(Source(base, base.name), architecture, tool_calling=tool_calling).to_json())
    return path


def fake_vllm(tmp_path: Path, reply: str, replies: dict[str, str] | None = None) -> tuple[dict, Path]:
    """PATH with the stand-in `vllm` executable, PYTHONPATH with an empty `vllm` package
    (inspect's provider checks that vllm imports before it starts the server). `replies`:
    {marker: reply}, the reply for a request whose messages hold the marker."""
    bin_dir, pkg = tmp_path / "bin", tmp_path / "pkg" / "vllm"
    bin_dir.mkdir(parents=True)
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("# stand-in: the real vLLM is not installed here\n")
    exe = bin_dir / "vllm"
    exe.write_text(f"#!{sys.executable}\n" + (Path(__file__).parent / "fake_vllm.py").read_text())
    exe.chmod(0o755)
    log = tmp_path / "vllm.jsonl"
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": str(tmp_path / "pkg"),
        "FAKE_VLLM_LOG": str(log),
        "FAKE_VLLM_REPLY": reply,
    }
    if replies is not None:
        (tmp_path / "replies.json").write_text(json.dumps(replies))
        env["FAKE_VLLM_REPLIES"] = str(tmp_path / "replies.json")
    return env, log
