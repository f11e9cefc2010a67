"""The harness's side of scoring: the plan's template and cache checks, prefetch's dry
run, and the evaluate stage's contract with ptb_scorer (--base-architecture, offline
variables, the chat template bundle, a ladder stopped by PTB_MODEL_INVALID, per-attempt
provenance)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, campaign_config, make_workdir, write_config, write_task

from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.checks import check_data, check_templates
from ptb_harness.campaign.config import load_config_files
from ptb_harness.campaign.scoring import base_architecture, missing_data, task_template, template_source
from ptb_harness.core.errors import ConfigError, HarnessError
from ptb_harness.prefetch import prefetch, prefetch_steps
from ptb_harness.results.outcome import cell_outcome
from ptb_harness.stages.evaluate import run_evaluate
from ptb_scorer.protocol import read_attempt_log

sys.path.insert(0, str(REPO / "tests"))
from scorer_fixtures import write_fixture_cache

TEMPLATE = "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if tools %}T{% endif %}"


def model_dir(d: Path, arch: str, template: str | None = TEMPLATE) -> Path:
    """A base model's files as far as the plan reads them: config.json, tokenizer_config.json."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps({"architectures": [arch]}))
    (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": template} if template else {}))
    return d


def real_tasks_campaign(
    tmp_path: Path,
    arch: str = "LlamaForCausalLM",
    models: list | None = None,
    template: str | None = TEMPLATE,
    tasks: tuple = ("gsm8k", "bfcl"),
) -> Path:
    wd = make_workdir(tmp_path / "wd")
    model_dir(wd / "models" / "m1", arch, template)
    cfg = campaign_config(tasks=list(tasks), paths={"tasks_dir": str(REPO / "tasks")})
    cfg["models"] = [{**cfg["models"][0], **(models[0] if models and "name" not in models[0] else {})}]
    cfg["models"] += [m for m in models or [] if "name" in m]
    write_config(wd, cfg)
    return wd


def hub_snapshot(hf: Path, repo_id: str, commit: str, arch: str | None, template: str | None) -> Path:
    """A repo in an HF cache as huggingface_hub leaves it: refs/main and the snapshot."""
    repo = hf / "hub" / f"models--{repo_id.replace('/', '--')}"
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    if arch:
        (snap / "config.json").write_text(json.dumps({"architectures": [arch]}))
    if template:
        (snap / "chat_template.jinja").write_text(template)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return snap


def load(wd: Path, **site):
    """The campaign with these site knobs (from a profile's site.yaml, as on a real site)."""
    profile = wd.parent / "profile"
    profile.mkdir(exist_ok=True)
    (profile / "site.yaml").write_text(yaml.safe_dump({"site": site}))
    return load_config_files(wd, profile)


def test_a_base_model_without_a_template_is_a_config_error(tmp_path):
    wd = real_tasks_campaign(tmp_path, template=None)
    with pytest.raises(ConfigError) as err:
        load_config_files(wd)
    assert str(err.value) == (
        "models[0] (m1): task gsm8k: models/m1 ships no chat template (chat_template.jinja, tokenizer_config.json"
        " chat_template); name one with models[0].chat_template_from (e.g. the instruct model)"
    )


def test_the_template_is_the_base_models_own_with_the_tasks_tool_parser(tmp_path):
    campaign = load_config_files(real_tasks_campaign(tmp_path, arch="Qwen3ForCausalLM"))
    assert base_architecture(campaign, "m1") == "Qwen3ForCausalLM"
    check_templates(campaign)
    gsm8k, bfcl = (task_template(campaign, "m1", campaign.task(t)) for t in ("gsm8k", "bfcl"))
    assert gsm8k.text == TEMPLATE and gsm8k.tool_parser is None
    assert gsm8k.record()["source"] == {"repo": "models/m1", "file": "tokenizer_config.json", "revision": None}
    assert bfcl.text == TEMPLATE and bfcl.tool_parser == "hermes"


def test_chat_template_from_a_local_dir_and_template_variables(tmp_path):
    wd = real_tasks_campaign(
        tmp_path,
        template=None,
        models=[{"chat_template_from": {"path": "models/inst"}, "chat_template_kwargs": {"enable_thinking": False}}],
    )
    model_dir(wd / "models" / "inst", "LlamaForCausalLM", "INSTRUCT {{ tools }}")
    campaign = load_config_files(wd)
    t = task_template(campaign, "m1", campaign.task("bfcl"))
    assert (t.repo, t.text, t.tool_parser) == ("models/inst", "INSTRUCT {{ tools }}", "llama3_json")
    assert t.kwargs == {"enable_thinking": False}


def test_a_template_variable_that_is_an_argument_is_refused(tmp_path):
    wd = real_tasks_campaign(tmp_path, models=[{"chat_template_kwargs": {"tools": []}}])
    with pytest.raises(ConfigError, match=r"^models\[0\].chat_template_kwargs.tools: an argument of apply_chat"):
        load_config_files(wd)


def test_a_tool_task_on_a_family_without_a_parser_is_a_config_error(tmp_path):
    wd = real_tasks_campaign(tmp_path, arch="MysteryForCausalLM")
    with pytest.raises(ConfigError, match=r"models\[0\] \(m1\): task bfcl: .*MysteryForCausalLM has no tool-call"):
        load_config_files(wd)


def test_gemma3_without_tools_section_gets_our_tool_template_for_bfcl_only(tmp_path):
    campaign = load_config_files(real_tasks_campaign(tmp_path, arch="Gemma3ForConditionalGeneration", template="G"))
    assert task_template(campaign, "m1", campaign.task("gsm8k")).text == "G"
    bfcl = task_template(campaign, "m1", campaign.task("bfcl"))
    assert (bfcl.repo, bfcl.file, bfcl.tool_parser) == ("ptb_scorer", "templates/gemma3_tool_calling.jinja", "pythonic")
    assert bfcl.replaces == "models/m1 tokenizer_config.json (no tools section)"


def test_a_repo_template_comes_from_the_snapshot_refs_main_names_and_is_prefetched(tmp_path):
    hf = tmp_path / "hf"
    hub_snapshot(hf, "org/base", "a" * 40, "Qwen3ForCausalLM", None)  # a base model without a template
    wd = real_tasks_campaign(
        tmp_path,
        models=[{"name": "hub", "repo_id": "org/base", "chat_template_from": {"repo_id": "org/instruct"}}],
    )
    campaign = load(wd, hf_home=str(hf), hf_cache_mode="ro")
    assert "chat template repo org/instruct" in missing_data(campaign)
    assert template_source(campaign, "hub") is None
    with pytest.raises(ConfigError, match=r"^models\[1\] \(hub\): org/instruct is not in the HF cache"):
        task_template(campaign, "hub", campaign.task("gsm8k"))
    step = dict(prefetch_steps(campaign))["chat template org/instruct"]
    assert step[-2] == "org/instruct" and "chat_template.jinja" in json.loads(step[-1])
    hub_snapshot(hf, "org/instruct", "b" * 40, None, "OLD {{ tools }}")
    (hf / "hub" / "models--org--instruct" / "snapshots" / ("c" * 40)).mkdir()
    (hf / "hub" / "models--org--instruct" / "snapshots" / ("c" * 40) / "chat_template.jinja").write_text("NEW")
    campaign = load(wd, hf_home=str(hf), hf_cache_mode="ro")
    assert not [g for g in missing_data(campaign) if "org/instruct" in g]
    t = task_template(campaign, "hub", campaign.task("gsm8k"))
    # refs/main, not the last snapshot by name
    assert (t.text, t.revision, t.file) == ("OLD {{ tools }}", "b" * 40, "chat_template.jinja")


def test_a_cached_base_model_is_read_from_the_snapshot_refs_main_names(tmp_path):
    """Two snapshots: the plan reads the one huggingface_hub loads offline, not the last by name."""
    hf = tmp_path / "hf"
    repo = hf / "hub" / "models--org--base"
    for commit, arch in (("a" * 40, "Qwen3ForCausalLM"), ("b" * 40, "MysteryForCausalLM")):
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text(json.dumps({"architectures": [arch]}))
        (repo / "snapshots" / commit / "chat_template.jinja").write_text(TEMPLATE)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    wd = real_tasks_campaign(tmp_path, models=[{"name": "hub", "repo_id": "org/base"}])
    campaign = load(wd, hf_home=str(hf), hf_cache_mode="ro")
    assert base_architecture(campaign, "hub") == "Qwen3ForCausalLM"
    assert not [g for g in missing_data(campaign) if g.startswith("model ")]
    (repo / "refs" / "main").write_text("c" * 40)  # main moved to a commit not downloaded
    assert base_architecture(load(wd, hf_home=str(hf), hf_cache_mode="ro"), "hub") is None
    assert "model org/base" in missing_data(load(wd, hf_home=str(hf), hf_cache_mode="ro"))


def test_cache_check_names_what_is_missing_in_one_line(tmp_path):
    wd = real_tasks_campaign(tmp_path, models=[{"name": "q", "repo_id": "Qwen/Qwen3-1.7B-Base"}])
    with pytest.raises(ConfigError, match=r"^site.hf_home is unset, and tasks gsm8k, bfcl read datasets offline"):
        check_data(load(wd))
    empty = tmp_path / "hf"
    empty.mkdir()
    campaign = load(wd, hf_home=str(empty), hf_cache_mode="ro")
    with pytest.raises(ConfigError) as err:
        check_data(campaign)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"HF cache {empty} lacks gsm8k: dataset openai/gsm8k (default-data_dir=main)")
    assert "bfcl: inspect_evals files BFCL/BFCL_v4_simple_python.json" in line
    assert "model Qwen/Qwen3-1.7B-Base" in line and line.endswith("run `ptb-harness prefetch` (login node)")
    assert prefetch(campaign, dry_run=True) == missing_data(campaign)


def test_a_filled_cache_passes_and_prefetch_builds_each_task_from_it(tmp_path):
    hf = write_fixture_cache(tmp_path / "hf", ("gsm8k", "bfcl"))
    campaign = load(real_tasks_campaign(tmp_path), hf_home=str(hf), hf_cache_mode="ro")
    assert missing_data(campaign) == []
    # prefetch's own steps (the tasks' loading code), run offline against the fixture cache
    said: list[str] = []
    assert prefetch(campaign, offline=True, say=said.append) == []
    assert said == [f"prefetch task gsm8k -> {hf}", f"prefetch task bfcl -> {hf}"]
    assert [w for w, _ in prefetch_steps(campaign)] == ["task gsm8k", "task bfcl"]


def test_aime2026_is_prefetched_like_the_others(tmp_path):
    """Its dataset (math-ai/aime26, inspect_evals' pinned revision) is named when missing and
    built by prefetch's own step (the task's loading code, offline on the fixture cache)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    wd = real_tasks_campaign(tmp_path, tasks=("aime2026",))
    missing = missing_data(load(wd, hf_home=str(empty), hf_cache_mode="ro"))
    assert missing == ["aime2026: dataset math-ai/aime26 (default)"]
    hf = write_fixture_cache(tmp_path / "hf", ("aime2026",))
    campaign = load(wd, hf_home=str(hf), hf_cache_mode="ro")
    assert missing_data(campaign) == []
    said: list[str] = []
    assert prefetch(campaign, offline=True, say=said.append) == []
    assert said == [f"prefetch task aime2026 -> {hf}"]


INVALID_SCORER = """
    import json, os, sys
    print("argv:", " ".join(sys.argv[1:]))
    print("bundle:", json.load(open("ptb_chat_template.json"))["text"].encode().hex())
    print("offline:", os.environ.get("HF_HUB_OFFLINE"), os.environ.get("HF_DATASETS_OFFLINE"))
    print('PTB_SCORER_INFO {"engine": "hf", "template": {"name": "llama3", "sha256": "ab"}}')
    print("PTB_MODEL_INVALID: architecture changed from the base model's LlamaForCausalLM to X")
    sys.exit(3)
"""


def test_model_invalid_stops_the_ladder_and_is_the_agents_failure(tmp_path):
    wd = make_workdir(tmp_path / "wd")
    model_dir(wd / "models" / "m1", "LlamaForCausalLM")
    ladder = [{"attempts": 2, "max_tokens": 100}, {"attempts": 2, "max_tokens": 50}]
    info = {"chat_template": {}, "evaluate": {"ladder": ladder, "pass_base_architecture": True}}
    write_task(wd, "invalid", INVALID_SCORER, info)
    write_config(wd, campaign_config(tasks=["invalid"]))
    campaign = load_config_files(wd)
    cell = Cell("exit0", "invalid", "m1", "0.0005", 0, 1)
    cdir = campaign.cell_dir(cell)
    (cdir / "final_model").mkdir(parents=True)
    (cdir / "final_model" / "config.json").write_text("{}")
    (cdir / "final_model" / "chat_template.jinja").write_text("AGENT")  # never the one the scorer gets
    (cdir / "solve.json").write_text(json.dumps({"final_model_files": 1, "description": "exited 0"}))
    with pytest.raises(HarnessError, match="after 1 attempts of 4"):
        run_evaluate(
            campaign,
            cell,
            solve_json=cdir / "solve.json",
            final_model=cdir / "final_model",
            metrics_json=cdir / "metrics.json",
        )
    record = json.loads((cdir / "evaluate.json").read_text())
    (attempt,) = record["attempts"]
    assert attempt["problem"].startswith("PTB_MODEL_INVALID: architecture changed")
    assert attempt["scorer"] == {"engine": "hf", "template": {"name": "llama3", "sha256": "ab"}}
    assert len(attempt["evaluate_py_sha256"]) == 64
    log = (cdir / attempt["log"]).read_text()
    assert "--base-architecture LlamaForCausalLM --max-tokens 100" in log and "offline: 1 1" in log
    # the base model's template, in the scorer's copy of the task; evaluate.json says which
    assert f"bundle: {TEMPLATE.encode().hex()}" in log and b"AGENT".hex() not in log
    assert record["chat_template"]["source"] == {"repo": "models/m1", "file": "tokenizer_config.json", "revision": None}
    outcome, why, _ = cell_outcome(cdir)
    assert outcome == "agent_failed" and "architecture changed" in why


def scorer_report(attempt_log):
    report = read_attempt_log(attempt_log)
    return report.scorer_info, report.model_invalid


def test_a_model_the_arith_scorer_refuses_ends_the_ladder_as_the_agents_failure(tmp_path):
    """The demo's real arith scorer (ladder of 2 + 1 attempts) on a final model with pickle
    weights only: one attempt, PTB_MODEL_INVALID, agent_failed naming why; no rerun of
    the ladder."""
    wd = make_workdir(tmp_path / "wd")
    write_config(wd, campaign_config(tasks=["arith"], paths={"tasks_dir": str(REPO / "tasks")}))
    campaign = load_config_files(wd)
    cell = Cell("exit0", "arith", "m1", "0.0005", 0, 1)
    cdir = campaign.cell_dir(cell)
    model = cdir / "final_model"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    (model / "pytorch_model.bin").write_bytes(b"\x80\x04pickle")
    (cdir / "solve.json").write_text(json.dumps({"final_model_files": 2, "description": "exited 0"}))
    with pytest.raises(HarnessError, match="after 1 attempts of 3"):
        run_evaluate(
            campaign, cell, solve_json=cdir / "solve.json", final_model=model, metrics_json=cdir / "metrics.json"
        )
    (attempt,) = json.loads((cdir / "evaluate.json").read_text())["attempts"]
    assert attempt["model_invalid"] and attempt["exit_code"] == 3
    assert attempt["problem"].startswith("PTB_MODEL_INVALID: weights are pickles (pytorch_model.bin)")
    outcome, why, _ = cell_outcome(cdir)
    assert outcome == "agent_failed" and "weights are pickles" in why, why


def test_scorer_report_reads_info_and_the_last_invalid_line(tmp_path):
    log = tmp_path / "a.log"
    log.write_text('[t] PTB_SCORER_INFO {"a": 1}\n[t] noise\n[t] PTB_MODEL_INVALID: no weights\n')
    assert scorer_report(log) == ({"a": 1}, "no weights")
    log.write_text("[t] PTB_SCORER_INFO {broken\n")
    assert scorer_report(log) == (None, None)
