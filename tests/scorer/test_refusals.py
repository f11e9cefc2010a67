"""A final model whose loading would run the agent's code is refused, as the agent's
failure: ptb_scorer.refusals on hand-made model dirs, then the demo's arith scorer (its
evaluate.py as a subprocess) printing the one PTB_MODEL_INVALID line. The shared scorer's
evaluate.py: tests/scorer/test_evaluate_py.py (BAD); the stage and the outcome:
tests/unit/test_scoring_harness.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO

from ptb_scorer.refusals import refusal


def _model(root: Path) -> Path:
    """A model dir as an agent saves one (files only; nothing here is loaded)."""
    m = root / "final_model"
    m.mkdir()
    (m / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    (m / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    (m / "model.safetensors").write_bytes(b"\0" * 16)
    return m


def _edit(path: Path, **keys) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **keys}))


def _pickle_only(m: Path) -> None:
    (m / "model.safetensors").unlink()
    (m / "pytorch_model.bin").write_bytes(b"\x80\x04pickle")


REFUSED: dict[str, tuple[Callable[[Path], None], str]] = {
    "auto_map, unknown model_type": (
        lambda m: _edit(m / "config.json", model_type="mystery", auto_map={"AutoModelForCausalLM": "modeling.M"}),
        "config.json asks for remote code",
    ),
    "tokenizer auto_map": (
        lambda m: _edit(
            m / "tokenizer_config.json", tokenizer_class="MysteryTokenizer", auto_map={"AutoTokenizer": ["t.T", None]}
        ),
        "the tokenizer asks for remote code",
    ),
    "tokenizer auto_map in config.json": (
        lambda m: (
            _edit(m / "config.json", auto_map={"AutoTokenizer": ["t.T", None]}),
            _edit(m / "tokenizer_config.json", tokenizer_class=None),
        ),
        "the tokenizer asks for remote code",
    ),
    "pickle weights": (_pickle_only, "weights are pickles (pytorch_model.bin)"),
    "sharded pickle weights": (
        lambda m: (
            _pickle_only(m),
            [(m / f"pytorch_model-0000{i}-of-00004.bin").write_bytes(b"x") for i in range(1, 5)],
        ),
        "(+2)",
    ),
    "custom_generate": (
        lambda m: (m / "custom_generate").mkdir() or (m / "custom_generate" / "generate.py").write_text("x"),
        "custom_generate/",
    ),
}
ACCEPTED: dict[str, Callable[[Path], None]] = {
    "plain safetensors model": lambda m: None,
    # a stale auto_map beside a type transformers knows: its own class loads, no code runs
    "auto_map with a known model_type": lambda m: _edit(m / "config.json", auto_map={"AutoModelForCausalLM": "m.M"}),
    "tokenizer auto_map with a transformers class": lambda m: _edit(
        m / "tokenizer_config.json", auto_map={"AutoTokenizer": ["t.T", None]}
    ),
    # the Trainer's own pickles beside safetensors weights are never loaded as weights
    "training_args.bin beside safetensors": lambda m: (m / "training_args.bin").write_bytes(b"\x80\x04"),
    "safetensors and a pickle copy": lambda m: (m / "pytorch_model.bin").write_bytes(b"\x80\x04"),
    "broken config.json (the model check's to name)": lambda m: (m / "config.json").write_text("{"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_refused(case, tmp_path):
    m = _model(tmp_path)
    REFUSED[case][0](m)
    why = refusal(m)
    assert why is not None and REFUSED[case][1] in why, why


@pytest.mark.parametrize("case", ACCEPTED)
def test_accepted(case, tmp_path):
    m = _model(tmp_path)
    ACCEPTED[case](m)
    assert refusal(m) is None


@pytest.mark.parametrize("case", REFUSED)
def test_the_arith_scorer_refuses_in_one_named_line(case, tmp_path):
    m = _model(tmp_path)
    REFUSED[case][0](m)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run(
        [sys.executable, "evaluate.py", "--model-path", str(m), "--json-output-file", str(tmp_path / "m.json")],
        cwd=REPO / "tasks" / "arith",
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert res.returncode == 3, res.stdout + res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("PTB_MODEL_INVALID: ")]
    assert len(lines) == 1 and REFUSED[case][1] in lines[0] and "Traceback" not in res.stderr
    assert not (tmp_path / "m.json").exists()
