"""The benchmark tasks through the harness: one real Snakemake run, one cell per task,
each scored by its real evaluate.py (ptb_scorer on inspect_ai, transformers backend, CPU)
on a tiny Llama 3-shaped base model (tests/scorer/family_models.py), offline, from fixture
data in the site's HF cache (read-only). The agent hands in the base model with a
template of its own saved into it: the scorer renders with the base model's, which the
harness also put into the agent's copy of the task. The ladder is shortened (tiny caps,
`--limit 2`, one seed of the final evaluation: tests/workflow/test_seeds_run.py runs five) to
keep CI cheap; everything else is the tasks' own."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys

import pytest
import yaml
from conftest import REPO, campaign_config, snakemake, write_agent, write_config

sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "scorer"))
from family_models import AGENT_TEMPLATE, build_family_model
from scorer_fixtures import TASKS, write_fixture_cache

from ptb_scorer.chat_template import model_templates

pytestmark = pytest.mark.slow

COPY_BASE = f"""
    set -eu
    cp -r "$MODEL_TO_TRAIN" final_model
    printf '%s' '{AGENT_TEMPLATE}' > final_model/chat_template.jinja
    cp ptb_chat_template.json final_model/seen_by_agent.json
    echo "copied $MODEL_TO_TRAIN"
"""
CAPS = {"gsm8k": 3, "humaneval": 4, "aime2025": 5, "aime2026": 8, "gpqamain": 6, "bfcl": 7}


def test_every_task_scores_through_the_ladder(tmp_path):
    wd = tmp_path / "wd"
    base = build_family_model("llama3", wd / "models" / "tiny")
    base_template = model_templates(base)["default"].text
    write_agent(wd, "copy_base", COPY_BASE)
    for task in TASKS:  # the real tasks (links followed), with a short ladder
        shutil.copytree(REPO / "tasks" / task, wd / "tasks" / task, symlinks=False)
        info_path = wd / "tasks" / task / "info.json"
        info = json.loads(info_path.read_text())
        info["evaluate"]["ladder"] = [{"attempts": 1, "max_tokens": CAPS[task]}]
        info["evaluate"]["extra_args"] = ["--limit", "2"]
        info_path.write_text(json.dumps(info))
    hf = write_fixture_cache(tmp_path / "hf")
    write_config(
        wd,
        campaign_config(
            agents=["copy_base"],
            tasks=list(TASKS),
            models=[{"name": "tiny", "path": "models/tiny"}],
            evaluate={"seeds": [72332]},
        ),
    )
    profile = tmp_path / "profile"
    profile.mkdir()
    shutil.copy(REPO / "profiles/local/config.yaml", profile / "config.yaml")
    site = {"site": {"hf_home": str(hf), "hf_cache_mode": "ro", "tmp_root": str(tmp_path / "scratch")}}
    (tmp_path / "scratch").mkdir()
    (profile / "site.yaml").write_text(yaml.safe_dump(site))

    run = snakemake(wd, profile_dir=profile, timeout=1200)
    assert run.returncode == 0, run.stderr[-5000:]
    for task in TASKS:
        cdir = wd / "results" / "cells" / "copy_base" / task / "tiny" / "0.0005h-0gpu-run1"
        metrics = json.loads((cdir / "metrics.json").read_text())
        assert 0 <= metrics["accuracy"] <= 1 and metrics["n_examples"] == 2, task
        assert (metrics["num_seeds"], list(metrics["per_seed"])) == (1, ["72332"])
        assert (metrics["engine"], metrics["max_tokens"]) == ("hf", CAPS[task])
        assert metrics["versions"]["inspect_ai"] == "0.3.285"
        # the base model's template (its tokenizer_config.json), not the one the agent saved
        template = metrics["chat_template"]
        assert template["source"] == {"repo": "models/tiny", "file": "tokenizer_config.json", "revision": None}
        assert template["sha256"] == hashlib.sha256(base_template.encode()).hexdigest()
        assert template["tool_parser"] == ("llama3_json" if task == "bfcl" else None)
        seen = json.loads((cdir / "final_model" / "seen_by_agent.json").read_text())
        assert seen["sha256"] == template["sha256"] and seen["text"] == base_template != AGENT_TEMPLATE
        record = json.loads((cdir / "evaluate.json").read_text())
        assert record["chat_template"] == template
        (attempt,) = record["attempts"]
        assert attempt["max_tokens"] == CAPS[task] and attempt["scorer"]["engine"] == "hf"
        assert attempt["scorer"]["chat_template"] == template
        # the cap of the ladder step, in the attempt's own log (argv and the scorer's line)
        log = (cdir / attempt["log"]).read_text()
        assert f"--max-tokens {CAPS[task]}" in log and f"max_tokens={CAPS[task]}" in log
        assert "--base-architecture LlamaForCausalLM" in log
    gpqa = json.loads((wd / "results/cells/copy_base/gpqamain/tiny/0.0005h-0gpu-run1/metrics.json").read_text())
    assert gpqa["shuffle_seed"] == "the run seed"  # each seed's choice order is its own
    board = (wd / "results" / "tables" / "leaderboard.md").read_text()
    assert all(task in board for task in TASKS)


def test_the_plan_names_missing_data_before_anything_runs(tmp_path):
    wd = tmp_path / "wd"
    write_agent(wd, "copy_base", COPY_BASE)
    (wd / "models" / "m").mkdir(parents=True)
    (wd / "models" / "m" / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    (wd / "models" / "m" / "chat_template.jinja").write_text("{{ messages }}{{ tools }}")
    cfg = campaign_config(agents=["copy_base"], tasks=["gsm8k"], models=[{"name": "m", "path": "models/m"}])
    cfg["paths"] = {"tasks_dir": str(REPO / "tasks")}
    write_config(wd, cfg)
    profile = tmp_path / "profile"
    profile.mkdir()
    shutil.copy(REPO / "profiles/local/config.yaml", profile / "config.yaml")
    (tmp_path / "hf").mkdir()
    site = {"site": {"hf_home": str(tmp_path / "hf"), "hf_cache_mode": "ro"}}
    (profile / "site.yaml").write_text(yaml.safe_dump(site))
    run = snakemake(wd, "-n", profile_dir=profile)
    assert run.returncode != 0
    line = next(ln for ln in (run.stdout + run.stderr).splitlines() if ln.startswith("config error:"))
    assert "lacks gsm8k: dataset openai/gsm8k (default-data_dir=main)" in line and "ptb-harness prefetch" in line
    assert not (wd / "results").exists()
