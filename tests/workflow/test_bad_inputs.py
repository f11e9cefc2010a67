"""Bad inputs (configs, agents, tasks, profiles, campaign files, traces): each stops
before anything starts, with one line naming the file or key, and no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, campaign_config, snakemake, write_config

pytestmark = pytest.mark.slow

M1 = [{"name": "m1", "path": "models/m1"}]

CASES = [
    # (id, config overrides, text the error line must contain)
    ("empty-agents", {"agents": []}, "agents:"),
    ("empty-tasks", {"tasks": []}, "tasks:"),
    ("unknown-agent-dir", {"agents": ["exit0", "nobody"]}, "agents[1]: agent directory"),
    ("unknown-task-dir", {"tasks": ["nothing"]}, "tasks[0]: task directory"),
    ("duplicate-agent", {"agents": ["exit0", "exit0"]}, "agents[1]: duplicate entry"),
    ("duplicate-model", {"models": M1 + M1}, "models[].name[1]: duplicate entry"),
    ("duplicate-hours-spelled-twice", {"hours": [0.5, 0.50]}, "hours[1]: duplicate entry"),
    ("zero-budget", {"hours": [0]}, "hours[0]:"),
    ("negative-budget", {"hours": [1, -2]}, "hours[1]:"),
    ("budget-not-a-number", {"hours": ["ten"]}, "hours[0]:"),
    ("slash-in-agent", {"agents": ["team/agent"]}, "agents[0]: 'team/agent' is not a valid name"),
    ("dotdot-in-task", {"tasks": ["a..b"]}, "tasks[0]: 'a..b' is not a valid name"),
    ("whitespace-in-model", {"models": [{"name": "my model", "path": "models/m1"}]}, "models[0].name"),
    ("model-without-source", {"models": [{"name": "m1"}]}, "models[0]: give exactly one of"),
    ("missing-local-model", {"models": [{"name": "m9", "path": "models/nowhere"}]}, "models[0].path: "),
    ("model-with-two-sources", {"models": [{"name": "m1", "path": "x", "repo_id": "a/b"}]}, "models[0]: give exactly"),
    ("negative-gpus", {"num_gpus": [-1]}, "num_gpus[0]:"),
    ("run-not-an-integer", {"runs": ["first"]}, "runs[0]:"),
    ("duplicate-runs", {"runs": [1, 2, 1]}, "runs[2]: duplicate entry"),
    ("missing-prompt-template", {"solve": {"prompt_template": "no/such/template.txt"}}, "solve.prompt_template: file"),
    ("misspelled-key", {"agnets": ["exit0"]}, "'agnets' was unexpected"),
    ("unknown-solve-knob", {"solve": {"timeout": 3}}, "solve: Additional properties"),
    ("agent-config-for-stranger", {"agent_config": {"ghost": "x"}}, "agent_config.ghost"),
]


def _write(rel: str, text: str):
    """A case that writes (or, with text None, removes) one file of the campaign dir."""

    def setup(workdir: Path, profile: Path) -> list[str]:
        path = (profile if rel.startswith("profile/") else workdir) / rel.removeprefix("profile/")
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return []

    return setup


def _config(**overrides):
    def setup(workdir: Path, profile: Path) -> list[str]:
        write_config(workdir, campaign_config(**overrides))
        return []

    return setup


def _campaign_file(text: str | None):
    def setup(workdir: Path, profile: Path) -> list[str]:
        if text is not None:
            (workdir / "camp.yaml").write_text(text)
        return ["--config", f"campaign={workdir / 'camp.yaml'}"]

    return setup


def _results_under_a_file(workdir: Path, profile: Path) -> list[str]:
    (workdir / "a-file").write_text("")
    write_config(workdir, campaign_config(paths={"results_dir": str(workdir / "a-file" / "results")}))
    return []


INSTRUCT = {"fake": {"m1": 0.5}}
FILE_CASES = [
    ("agent-without-solve.sh", _write("agents/exit0/solve.sh", None), "agents[0]:", "solve.sh not found"),
    ("task-without-evaluate.py", _write("tasks/fake/evaluate.py", None), "tasks[0]:", "evaluate.py not found"),
    ("api_keys.json-not-a-list", _write("agents/exit0/api_keys.json", '{"KEY": 1}'), "api_keys.json", "JSON list"),
    ("api_keys.json-not-json", _write("agents/exit0/api_keys.json", "[KEY"), "api_keys.json", "not valid JSON"),
    ("api_keys.json-bad-name", _write("agents/exit0/api_keys.json", '["MY-KEY"]'), "api_keys.json[0]", "MY-KEY"),
    ("env_passthrough-bad-name", _write("agents/exit0/env_passthrough.txt", "OK_NAME\n1BAD\n"), "env_passthrough.txt:2", "1BAD"),
    ("agent.json-unknown-key", _write("agents/exit0/agent.json", '{"trace": "raw"}'), "agent.json", "unknown key"),
    ("agent.json-bad-trace-format", _write("agents/exit0/agent.json", '{"trace_format": "json"}'), "agent.json", "trace_format"),
    ("info.json-not-json", _write("tasks/fake/info.json", "{"), "info.json", "not valid JSON"),
    ("info.json-zero-attempts", _write("tasks/fake/info.json", '{"evaluate": {"ladder": [{"attempts": 0, "max_tokens": null}]}}'), "ladder[0].attempts", "positive integer"),
    ("info.json-bad-token-flag", _write("tasks/fake/info.json", '{"evaluate": {"token_flag": "--tokens"}}'), "token_flag", "--max-tokens"),
    ("profile-unknown-knob", _write("profile/site.yaml", "site: {gpu_reaper: all}"), "site", "'gpu_reaper' was unexpected"),
    ("profile-bad-runtime", _write("profile/site.yaml", "site: {runtime: docker}"), "site.runtime", "docker"),
    # (a site.yaml that is not YAML at all is read by Snakemake itself, before the harness:
    # its WorkflowError does not name the file; `ptb-harness doctor --profile P` does)
    ("campaign-file-not-yaml", _campaign_file("agents: [unclosed"), "campaign", "not valid YAML"),
    ("campaign-file-missing", _campaign_file(None), "campaign", "not found"),
    ("campaign-file-sets-site", _campaign_file("site: {tmp_root: /x}"), "campaign", "site"),
    ("campaign-file-not-a-mapping", _campaign_file("- a\n- b\n"), "campaign", "mapping"),
    ("weights-missing-a-task", _config(leaderboard={"rules": "custom", "weighting": "explicit", "weights": {}}), "leaderboard.weights", "fake"),
    ("weights-for-a-stranger", _config(leaderboard={"rules": "custom", "weights": {"ghost": 1}}), "leaderboard.weights.ghost", "not a task"),
    ("inverse-gap-without-scores", _config(leaderboard={"rules": "custom", "weighting": "inverse_gap"}), "leaderboard.instruct_scores.fake", "m1"),
    ("inverse-gap-without-base-agent", _config(leaderboard={"rules": "custom", "weighting": "inverse_gap", "instruct_scores": INSTRUCT}), "leaderboard.base_agent", "noop"),
    ("instruct-score-above-1", _config(leaderboard={"rules": "custom", "instruct_scores": {"fake": {"m1": 7}}}), "leaderboard", "7"),
    ("results-dir-under-a-file", _results_under_a_file, "paths.results_dir", "is not a directory"),
]  # fmt: skip
INPUTS = [(name, _config(**overrides), key, "") for name, overrides, key in CASES] + FILE_CASES


@pytest.mark.parametrize(("setup", "key", "detail"), [c[1:] for c in INPUTS], ids=[c[0] for c in INPUTS])
def test_bad_input_fails_fast_with_one_line_naming_the_file_or_key(workdir, tmp_path, setup, key, detail):
    """Each malformed input: non-zero exit, one `config error:` line naming it, no
    traceback, nothing started (no results dir)."""
    profile = tmp_path / "profile"
    profile.mkdir()
    for name in ("config.yaml", "site.yaml"):
        (profile / name).write_text((REPO / "profiles" / "local" / name).read_text())
    args = setup(workdir, profile)
    res = snakemake(workdir, "-n", *args, profile_dir=profile)
    assert res.returncode != 0
    errors = [line for line in res.stderr.splitlines() if line.startswith("config error:")]
    assert len(errors) == 1, res.stderr
    assert key in errors[0] and detail in errors[0], errors[0]
    assert "Traceback" not in res.stderr
    assert not (workdir / "results").exists()


def test_there_are_at_least_30_bad_inputs():
    assert len(INPUTS) + len(TRACE_INPUTS) >= 30


TRACE_INPUTS = [
    ("missing-trace", None, "No such file or directory"),
    ("trace-is-a-directory", "dir", "Is a directory"),
]


@pytest.mark.parametrize(("kind", "expected"), [c[1:] for c in TRACE_INPUTS], ids=[c[0] for c in TRACE_INPUTS])
def test_parse_trace_bad_input_is_one_line(tmp_path, kind, expected):
    raw = tmp_path / "solve_out.txt"
    if kind == "dir":
        raw.mkdir()
    res = subprocess.run(
        [sys.executable, "-m", "ptb_harness", "parse-trace", str(raw), str(tmp_path / "out.txt")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("ptb-harness parse-trace: ")
    assert str(raw) in res.stderr and expected in res.stderr, res.stderr
    assert not (tmp_path / "out.txt").exists()


def test_binary_garbage_trace_is_not_an_error_but_a_plain_copy(tmp_path):
    """Garbage bytes are a (plain) trace, not a bad input: copied, counted, one log line."""
    raw = tmp_path / "solve_out.txt"
    raw.write_bytes(bytes(range(256)) * 100 + b"\n\x00\xff{not json\n")
    res = subprocess.run(
        [sys.executable, "-m", "ptb_harness", "parse-trace", str(raw), str(tmp_path / "out.txt")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0 and res.stderr.count("\n") == 1 and res.stderr.startswith("plain trace:")
    assert (tmp_path / "out.txt").read_bytes().endswith(b"\x00\xff{not json\n")


def test_campaign_file_replaces_campaign_keys(workdir):
    other = workdir / "other.yaml"
    other.write_text(yaml.safe_dump({"agents": ["exit3"], "hours": [0.001, 0.002]}))
    res = snakemake(workdir, "-n", "--config", f"campaign={other}")
    assert res.returncode == 0, res.stderr
    assert "results/cells/exit3/fake/m1/0.001h-0gpu-run1/solve.json" in res.stdout
    assert "exit0" not in res.stdout
