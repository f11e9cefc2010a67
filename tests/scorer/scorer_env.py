"""The scorer tests' offline HF home with every task's fixture rows (tests/scorer_fixtures.py).

Its variables are set only while a test module that asks for ``hf_home`` runs (and restored
after), so no other test sees them. `datasets` and `inspect_evals` read their cache
locations once, at import: the in-process tests import them inside that window.
"""

from __future__ import annotations

import os
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
    try:
        yield HF_HOME
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's tiny Llama (LlamaForCausalLM, no chat template of its own)."""
    from ptb_harness.demo.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny")
