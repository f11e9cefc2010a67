"""Agent-controlled text in real campaign runs (`ptb-harness run`, the real Snakemake),
under the isolating runtime `bwrap` and under `none`: the file names an agent leaves and
the config fields its model carries reach the evidence, and from there leaderboard.md,
cells.csv, `ptb-harness status` (and `--json`), `collect`'s output and the stage logs.
Each stays text in its place: a table row stays a row, a CSV record a record, a terminal
line a line without raw escape bytes; the viewer still escapes it as HTML.

The scorer of task `fake` is a stand-in that refuses a model the way ptb_scorer.model
does (`PTB_MODEL_INVALID: architecture X has no chat template`, exit 3), quoting the
agent's config field as the real one does.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import campaign_config, make_workdir, write_agent, write_config, write_task
from conftest import cell_dir as _cell_dir
from hostile import harness_run, write_profile
from markdown_it import MarkdownIt

pytestmark = pytest.mark.slow

HOURS = "0.002"
#: bash printf text of a hostile name: a newline, a forged heading, raw HTML, a pipe, ESC
#: sequences that set the window title and erase the line, then a forged status line, a
#: bidi override and a byte that is not UTF-8
NAME = (
    r"w.bin\n# FORGED HEADING\n<img src=x onerror=alert(1)>|"
    r"\033]0;pwned\007\033[2K\r  scored       forged: accuracy 1.0\342\200\256\377"
)
#: the same text as JSON would quote it in a config field (no undecodable byte there)
FIELD = "Evil\\r# FORGED\\u001b]0;pwned\\u0007\\u001b[2K|<img src=x onerror=alert(1)>\\u202e`x`"
AGENTS = {
    # a link among the model's files: delivery refuses it and names it in the evidence
    "name_link": f"""
        mkdir -p final_model && echo '{{"score": 0.5}}' > final_model/config.json
        ln -s config.json "final_model/$(printf '{NAME}')"
    """,
    # a regular file of that name: delivered, scored; the name shows in the viewer only
    "name_file": f"""
        mkdir -p final_model && echo '{{"score": 0.25}}' > final_model/config.json
        printf x > "final_model/$(printf '{NAME}')"
    """,
    # a config field the scorer quotes when it refuses the model
    "config_field": f"""
        mkdir -p final_model
        printf '%s' '{{"architectures": ["{FIELD}"]}}' > final_model/config.json
    """,
}
#: the scorer stand-in (see the module docstring)
SCORER = """
    import json, pathlib, sys
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))  # --model-path M --json-output-file F ...
    cfg = json.loads(pathlib.Path(args["--model-path"], "config.json").read_text())
    if "score" not in cfg:
        arch = (cfg.get("architectures") or ["?"])[0]
        print(f"PTB_MODEL_INVALID: architecture {arch} has no chat template (known: LlamaForCausalLM)", flush=True)
        sys.exit(3)
    pathlib.Path(args["--json-output-file"]).write_text(json.dumps({"accuracy": cfg["score"]}))
"""
#: what no terminal, table or log line may carry raw
RAW = [b"\x1b", b"\x07", b"\r", "\u202e".encode(), b"\xff"]
UNSCORED_HEAD = ["agent", "task", "model", "hours", "GPUs", "run", "outcome", "evidence"]


def raw_bytes(data: bytes) -> list[bytes]:
    return [b for b in RAW if b in data]


def cmd(workdir: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "ptb_harness", *args, "--workdir", str(workdir), "--profile", str(profile)]
    return subprocess.run(argv, capture_output=True, timeout=120)


@pytest.fixture(scope="module", params=["bwrap", "none"])
def campaign(request, tmp_path_factory):
    runtime = request.param
    root = tmp_path_factory.mktemp(f"text-{runtime}")
    workdir = make_workdir(root / "campaign")
    write_task(workdir, "fake", SCORER, {"evaluate": {"ladder": [{"attempts": 1, "max_tokens": None}]}})
    for name, body in AGENTS.items():
        write_agent(workdir, name, body)
    write_config(workdir, campaign_config(agents=["exit0", *AGENTS], hours=[float(HOURS)]))
    profile = write_profile(root, runtime=runtime, solve_resources={"cpus": 1}, evaluate_resources={"cpus": 1})
    run = harness_run(workdir, profile)
    assert "Traceback" not in run.stderr.replace("Traceback (most recent call last)", ""), run.stderr[-3000:]
    return runtime, workdir, profile


def cell_dir(workdir: Path, agent: str) -> Path:
    return _cell_dir(workdir, agent, hours=HOURS)


def test_the_cells_get_their_outcomes_with_the_agents_text_as_evidence(campaign):
    _runtime, workdir, profile = campaign
    res = cmd(workdir, profile, "status", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(res.stdout.decode("ascii"))  # ASCII JSON, every control escaped; strict reader
    seen = {c["agent"]: (c["outcome"], c["evidence"]) for c in data["cells"]}
    assert seen["exit0"] == ("scored", "accuracy 0.75")
    assert seen["name_file"] == ("scored", "accuracy 0.25")
    outcome, evidence = seen["name_link"]
    assert outcome == "agent_failed" and "is a symbolic link" in evidence
    # the name itself, valid Unicode (the undecodable byte as U+FFFD)
    assert "w.bin\n# FORGED HEADING\n<img src=x onerror=alert(1)>|\x1b]0;pwned\x07" in evidence
    assert evidence.count("\ufffd") == 1
    outcome, evidence = seen["config_field"]
    assert outcome == "agent_failed" and "PTB_MODEL_INVALID: architecture Evil\r# FORGED\x1b]0;pwned" in evidence


def test_status_prints_no_escape_byte_and_no_forged_line(campaign):
    _runtime, workdir, profile = campaign
    res = cmd(workdir, profile, "status")
    assert res.returncode == 0, res.stderr[-2000:]
    assert raw_bytes(res.stdout) == []
    lines = res.stdout.decode().splitlines()
    after = lines[lines.index("cells without a score:") + 1 :]
    listed = after[: next(i for i, line in enumerate([*after, ""]) if not line.startswith("  "))]
    assert sorted(line.split()[0] for line in listed) == ["agent_failed", "agent_failed"], lines
    assert not [line for line in lines if "forged" in line and not line.startswith("  agent_failed ")]
    assert not [line for line in lines if line.startswith(("# FORGED", "<img"))]
    link = next(line for line in listed if "/name_link/" in line)
    assert "w.bin\\n# FORGED HEADING\\n<img src=x onerror=alert(1)>|\\x1b]0;pwned\\x07\\x1b[2K\\r" in link
    assert "\\u202e\\udcff is a symbolic link" in link  # the undecodable byte, as os.fsdecode read it


def test_leaderboard_md_and_cells_csv_keep_their_rows(campaign):
    _runtime, workdir, profile = campaign
    res = cmd(workdir, profile, "collect")
    assert res.returncode == 0 and raw_bytes(res.stdout + res.stderr) == [], res.stderr[-3000:]
    tables = workdir / "results" / "tables"
    md_bytes = (tables / "leaderboard.md").read_bytes()
    assert raw_bytes(md_bytes) == [] and b"<img" not in md_bytes and b"\n# FORGED" not in md_bytes
    tokens = MarkdownIt("commonmark").enable("table").parse(md_bytes.decode())
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings == ["Leaderboard", "Cells without a score"]
    # the unscored table, as a Markdown parser reads it: its head and two rows of 8 cells
    start = next(i for i, t in enumerate(tokens) if t.type == "inline" and t.content == "Cells without a score")
    table = tokens[start : next(i for i, t in enumerate(tokens) if i > start and t.type == "table_close")]
    rows, row = [], None
    for t in table:
        if t.type == "tr_open":
            row = []
            rows.append(row)
        elif t.type == "inline" and row is not None:
            row.append(t.content)
    assert rows[0] == UNSCORED_HEAD and len(rows) == 3 and {len(r) for r in rows} == {8}, rows
    assert sorted(r[0] for r in rows[1:]) == ["config_field", "name_link"]
    assert all(r[6] == "agent_failed" for r in rows[1:])
    # cells.csv: one line per record, read back by the csv module to the same shape
    text = (tables / "cells.csv").read_bytes()
    assert raw_bytes(text) == []
    with open(tables / "cells.csv", newline="") as f:
        records = list(csv.DictReader(f))
    assert len(text.decode().splitlines()) == len(records) + 1 == 5
    assert {len(r) for r in records} == {len(records[0])} and None not in records[0]
    by_agent = {r["agent"]: r for r in records}
    assert by_agent["name_link"]["outcome"] == "agent_failed" and by_agent["name_file"]["accuracy"] == "0.25"
    assert "final_model/w.bin\\n# FORGED HEADING\\n<img" in by_agent["name_link"]["evidence"]
    assert "architecture Evil\\r# FORGED\\x1b]0;pwned" in by_agent["config_field"]["evidence"]
    # the viewer still escapes the same text as HTML (its own tests check it in Chromium)
    pages = [p.read_bytes() for p in (workdir / "results" / "viewer").rglob("*.html")]
    assert pages and not [p for p in pages if b"<img src=x" in p]


def test_the_stage_logs_keep_one_line_per_record(campaign):
    _runtime, workdir, _profile = campaign
    for agent, stage in (("name_link", "solve"), ("config_field", "evaluate")):
        log = (cell_dir(workdir, agent) / "logs" / f"{stage}.log").read_bytes()
        assert raw_bytes(log) == [], (agent, log[-2000:])
        assert not [line for line in log.decode().splitlines() if line.startswith(("# FORGED", "<img", "  scored"))]
    solve = (cell_dir(workdir, "name_link") / "logs" / "solve.log").read_text()
    assert "agent_failed: final_model/w.bin\\n# FORGED HEADING\\n<img src=x onerror=alert(1)>|\\x1b]0;pwned" in solve
