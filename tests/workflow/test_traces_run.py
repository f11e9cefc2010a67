"""Seed item 6 in a real campaign: an agent named like Claude that writes Codex JSON."""

from __future__ import annotations

import json

import pytest
from conftest import campaign_config, cell_dir, snakemake, write_agent, write_config

pytestmark = pytest.mark.slow

CODEX_EVENTS = [
    {"type": "thread.started", "thread_id": "th_1"},
    {"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": "Training the model."}},
    {"type": "item.completed", "item": {"id": "i2", "type": "command_execution", "command": "ls", "exit_code": 0}},
    {"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 5}},
]


def test_agent_named_claude_writing_codex_json_is_parsed_as_codex(workdir):
    lines = "\n".join(f"echo '{json.dumps(e)}'" for e in CODEX_EVENTS)
    body = "echo 'Installing codex CLI...'\n" + lines + "\nfor i in 1 2 3; do echo 'not json noise'; done\n"
    body += "mkdir -p final_model && echo '{\"score\": 0.6}' > final_model/config.json\n"
    write_agent(workdir, "claude_something", body)
    write_config(workdir, campaign_config(agents=["claude_something"]))
    run = snakemake(workdir)
    assert run.returncode == 0, run.stderr
    assert "NOT PARSABLE" not in run.stdout + run.stderr

    cdir = cell_dir(workdir, "claude_something")
    transcript = (cdir / "solve_parsed.txt").read_text()
    assert transcript.startswith("# trace format: codex (detected from content)")
    assert "ASSISTANT: Training the model." in transcript
    assert "TOOL RESULT (i2) exit 0" in transcript
    log = (cdir / "logs" / "parse_trace.log").read_text().strip().splitlines()
    assert len(log) == 1, log
    # the job wrapper's line: '<time> INFO ptb_harness.parse_trace: codex trace: ...'
    assert log[0].split(" ptb_harness.parse_trace: ", 1)[1].startswith("codex trace:") and "4 non-JSON lines" in log[0]
    assert (cdir / "solve_out_sanitized.txt").exists() and (cdir / "solve_parsed_sanitized.txt").exists()
