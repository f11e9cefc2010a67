"""The base model's own chat template, byte for byte, on both backends.

For each family the scored tasks use (tests/scorer/family_models.py: Qwen3, SmolLM3,
Llama 3.x, Gemma 3, each with a template of its family's shape), every scored task's
first fixture sample (gsm8k's 10-shot system prompt, humaneval, aime2025, aime2026, gpqamain,
bfcl's tools, the graded tasks' conversations) goes through the scorer's engine
(tests/scorer/render_matrix.py) on the transformers backend (inspect's provider as the
scorer runs it, recording its prompts) and on the vLLM backend (inspect's real vLLM
provider against the stand-in server, tests/scorer/fake_vllm.py, which renders with the
template file it is given as vLLM does; a stand-in, not vLLM). The final model handed in
carries another template (the agent's): it must never be used. Each prompt must equal
transformers' ``apply_chat_template`` of the *base* model dir for the same messages and
tools, and its token ids must hold BOS exactly once (none for the families without one).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from family_models import AGENT_TEMPLATE, FAMILIES, build_family_model, swap_template
from scorer_env import SCORER_ENV, fake_vllm, hf_home, records

from ptb_scorer import chat_template as ct
from ptb_scorer import render

pytestmark = pytest.mark.slow  # real scorer runs: minutes in all

HERE = Path(__file__).resolve().parent
#: a phrase of each task's first fixture sample, to find its request among the others
TASKS = {
    "gsm8k": "1,200 pens",
    "humaneval": "def add(a: int",
    "aime2025": "2025 is divided by 1000",
    "aime2026": "2026 is divided by 1000",
    "gpqamain": "Which particle carries charge",
    "bfcl": "coin flips",
    "arenahardwriting": "haiku about rain",
    "healthbench": "cough for two days",
}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """family -> (base model dir, final_model dir: the same model with the agent's template)."""
    root = tmp_path_factory.mktemp("families")
    out = {}
    for family in FAMILIES:
        base = build_family_model(family, root / family)
        final = root / f"{family}-final"
        shutil.copytree(base, final)
        swap_template(final)
        out[family] = (base, final)
    return out


def run_matrix(backend: str, models: dict, tmp: Path, env: dict) -> Path:
    logs = tmp / f"prompts-{backend}"
    logs.mkdir()
    pairs = [str(p) for base_final in models.values() for p in base_final]
    path = os.pathsep.join(filter(None, [str(HERE.parents[1] / "src"), env.get("PYTHONPATH")]))
    full_env = {**os.environ, **SCORER_ENV, **env, "PYTHONPATH": path}
    cmd = [sys.executable, str(HERE / "render_matrix.py"), backend, str(logs), *pairs]
    res = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    return logs


@pytest.fixture(scope="module")
def rendered(hf_home, models, tmp_path_factory) -> dict:
    """(backend, family, task) -> {prompt, input_ids, messages, tools}; and the day it ran."""
    tmp = tmp_path_factory.mktemp("matrix")
    day = datetime.date.today()
    out: dict = {"days": {day}}
    hf_logs = run_matrix("hf", models, tmp, {})
    env, vllm_log = fake_vllm(tmp / "vllm", "no answer")
    run_matrix("vllm", models, tmp, env)
    out["days"].add(datetime.date.today())
    requests = [r["body"] for r in records(vllm_log, "request") if r["path"].endswith("/chat/completions")]
    servers = {argv[1]: argv for argv in records(vllm_log, "argv")}
    for family, (_base, final) in models.items():
        hf = [json.loads(line) for line in (hf_logs / f"{final.name}.jsonl").read_text().splitlines()]
        # the tool task runs on a copy named <final>-tools (a server of its own, see render_matrix)
        paths = {str(final.resolve()), str(final.resolve()) + "-tools"}
        served = [r for r in records(vllm_log, "render") if r["model"] in paths]
        mine = [b for b in requests if b["model"] in paths]
        for task, phrase in TASKS.items():
            (h,) = [r for r in hf if phrase in json.dumps(r["messages"])]
            (v,) = [r for r in served if phrase in json.dumps(r["messages"])]
            (body,) = [b for b in mine if phrase in json.dumps(b["messages"])]
            out[("hf", family, task)] = h
            out[("vllm", family, task)] = {**v, "tools": body.get("tools"), "argv": servers[body["model"]]}
    return out


#: where the base model's template has no tools section, the one chosen in its place (ours)
OWN = {("gemma3", "bfcl"): ct.OWN_TEMPLATES / "gemma3_tool_calling.jinja"}


def reference(base: Path, messages: list, tools: list | None, template: Path | None = None) -> str:
    """transformers' own rendering with the base model dir's tokenizer and template (or
    the one chosen in its place)."""
    from transformers import AutoTokenizer

    plain = [{"role": m["role"], "content": m["content"]} for m in messages]
    assert all(isinstance(m["content"], str) for m in plain)  # what the scored tasks send
    tok = AutoTokenizer.from_pretrained(base)
    own = {"chat_template": template.read_text()} if template else {}
    return tok.apply_chat_template(plain, tools=tools, add_generation_prompt=True, tokenize=False, **own)


def same_text(prompt: str, ref: str, days: set) -> bool:
    """Equal; a SmolLM3 prompt renders its day, so a run across midnight may hold either."""
    if prompt == ref:
        return True
    stamps = [d.strftime("%d %B %Y") for d in sorted(days)]
    return len(stamps) == 2 and prompt.replace(stamps[0], stamps[1]) == ref.replace(stamps[0], stamps[1])


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("family", FAMILIES)
def test_prompt_is_the_base_templates_byte_for_byte_on_both_backends(rendered, models, family, task):
    from transformers import AutoTokenizer

    base, _final = models[family]
    hf, vllm = rendered[("hf", family, task)], rendered[("vllm", family, task)]
    # both backends were asked the same thing (inspect's OpenAI messages)
    assert hf["messages"] == vllm["messages"]
    tools = vllm["tools"]
    assert (tools is not None) == (task == "bfcl")
    argv = vllm["argv"]  # the server the request went to: the family's tool parser for bfcl only
    parser = argv[argv.index("--tool-call-parser") + 1] if "--tool-call-parser" in argv else None
    assert parser == (CHOICES[family][1] if task == "bfcl" else None)
    ref = reference(base, vllm["messages"], tools, OWN.get((family, task)))
    assert same_text(vllm["prompt"], ref, rendered["days"]), (vllm["prompt"], ref)
    assert same_text(hf["prompt"], ref, rendered["days"]), (hf["prompt"], ref)
    assert AGENT_TEMPLATE.split()[1] not in hf["prompt"] + vllm["prompt"]  # "TEMPLATE": the agent's
    # the token ids: the same on both, exactly the template's text, BOS once where the family has one
    tok = AutoTokenizer.from_pretrained(base)
    assert hf["input_ids"] == vllm["input_ids"] == tok(hf["prompt"], add_special_tokens=False)["input_ids"]
    bos = tok.bos_token_id
    if FAMILIES[family].bos is None:
        assert bos is None
    else:
        assert hf["input_ids"][0] == bos and hf["input_ids"].count(bos) == 1
        assert tok(ref)["input_ids"][:2] == [bos, bos]  # what the tokenizer's own BOS would have doubled


def test_a_tool_task_on_gemma3_gets_our_tool_template_and_the_pythonic_parser(rendered, models):
    """Gemma 3's template has no tools section: bfcl is scored with ours, recorded as such."""
    base, _ = models["gemma3"]
    template = ct.choose(ct.Source(base, "google/gemma-3-4b-pt", "c" * 40), "Gemma3ForCausalLM", tool_calling=True)
    assert template.file == "templates/gemma3_tool_calling.jinja" and template.tool_parser == "pythonic"
    assert template.replaces == "google/gemma-3-4b-pt tokenizer_config.json (no tools section)"
    prompt = rendered[("vllm", "gemma3", "bfcl")]["prompt"]
    assert prompt.startswith("<bos><start_of_turn>user\n") and '"name": "calc_binomial_probability"' in prompt
    assert "Python list of calls" in prompt and prompt.endswith("<start_of_turn>model\n")


# -- the template of a model dir, as transformers reads it ---------------------------------------
def tokenizer_template(model_dir: Path, tools: bool) -> str:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir).get_chat_template(tools=[{}] if tools else None)


LAYOUTS = {
    "tokenizer_config.json string": ({"tokenizer_config.json": {"chat_template": "A"}}, {"default": "A"}),
    "chat_template.jinja wins over tokenizer_config.json": (
        {"tokenizer_config.json": {"chat_template": "A"}, "chat_template.jinja": "B"},
        {"default": "B"},
    ),
    "named templates in tokenizer_config.json": (
        {"tokenizer_config.json": {"chat_template": [{"name": "default", "template": "D"},
                                                     {"name": "tool_use", "template": "T"}]}},
        {"default": "D", "tool_use": "T"},
    ),
    "additional_chat_templates/ beside chat_template.jinja": (
        {"chat_template.jinja": "D", "additional_chat_templates/tool_use.jinja": "T"},
        {"default": "D", "tool_use": "T"},
    ),
}  # fmt: skip


@pytest.mark.parametrize("layout", LAYOUTS)
def test_model_templates_reads_what_transformers_reads(layout, models, tmp_path):
    files, expected = LAYOUTS[layout]
    d = tmp_path / "m"
    shutil.copytree(models["llama3"][0], d)
    (d / "tokenizer_config.json").write_text(
        json.dumps(
            {k: v for k, v in json.loads((d / "tokenizer_config.json").read_text()).items() if k != "chat_template"}
        )
    )
    for name, content in files.items():
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name == "tokenizer_config.json":
            content = {**json.loads(path.read_text()), **content}
        path.write_text(json.dumps(content) if isinstance(content, dict) else content)
    found = ct.model_templates(d)
    assert {k: v.text for k, v in found.items()} == expected
    for tools in (False, True):
        assert found[ct.pick(found, tools)].text == tokenizer_template(d, tools)


def test_a_base_model_without_a_template_is_one_line(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(ct.TemplateError, match=r"^org/base ships no chat template \(chat_template.jinja"):
        ct.choose(ct.Source(tmp_path, "org/base"), "Qwen3ForCausalLM", tool_calling=False)


CHOICES = {  # family -> (the template reads tools, the parser / our template)
    "qwen3": (True, "hermes", None),
    "smollm3": (True, "hermes", None),
    "llama3": (True, "llama3_json", None),
    "gemma3": (False, "pythonic", "templates/gemma3_tool_calling.jinja"),
}


@pytest.mark.parametrize("family", CHOICES)
def test_tool_parser_table(family, models):
    reads_tools, parser, own = CHOICES[family]
    base = models[family][0]
    assert ct.supports_tools(FAMILIES[family].template) is reads_tools
    plain = ct.choose(ct.Source(base, family), FAMILIES[family].architecture, tool_calling=False)
    assert plain.tool_parser is None and plain.text == FAMILIES[family].template
    tools = ct.choose(ct.Source(base, family), FAMILIES[family].architecture, tool_calling=True)
    assert tools.tool_parser == parser
    assert (tools.file if own else None) == own
    assert (tools.text == plain.text) is (own is None)


def test_tool_task_on_an_unknown_family_is_one_line(models):
    with pytest.raises(ct.TemplateError, match="architecture MysteryForCausalLM has no tool-call parser"):
        ct.choose(ct.Source(models["qwen3"][0], "x"), "MysteryForCausalLM", tool_calling=True)


def test_bundle_round_trip_and_a_tampered_text_is_refused(models, tmp_path):
    t = ct.choose(ct.Source(models["qwen3"][0], "Qwen/Qwen3-1.7B-Base", "a" * 40), "Qwen3ForCausalLM",
                  tool_calling=False, kwargs={"enable_thinking": False})  # fmt: skip
    path = tmp_path / ct.BUNDLE_FILE
    path.write_text(t.to_json())
    assert ct.load_bundle(path) == t
    assert t.record()["source"] == {
        "repo": "Qwen/Qwen3-1.7B-Base",
        "file": "tokenizer_config.json",
        "revision": "a" * 40,
    }
    path.write_text(t.to_json().replace("im_start", "im_strt"))
    with pytest.raises(ct.TemplateError, match="does not match its sha256"):
        ct.load_bundle(path)
    with pytest.raises(ct.TemplateError, match="not found: the harness writes it"):
        ct.load_bundle(tmp_path / "absent.json")


def test_content_format_detection():
    """vLLM hands a template that loops over a message's content (Gemma 3's) lists of parts."""
    detect = {f: render.content_format(FAMILIES[f].template) for f in FAMILIES}
    assert detect == {"qwen3": "string", "smollm3": "string", "llama3": "string", "gemma3": "openai"}
    own = (ct.OWN_TEMPLATES / "gemma3_tool_calling.jinja").read_text()
    assert render.content_format(own) == "openai"
