"""`ptb-harness status --targets`: what a rerun is given."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from conftest import VOUCHED, campaign_config, make_workdir, rewrite_in_place, scored_campaign

from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.config import load_config_files


def _targets(workdir: Path, *flags: str) -> list[str]:
    cmd = [sys.executable, "-m", "ptb_harness", "status", "--workdir", str(workdir), "--targets", *flags]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()


def test_targets_leave_agent_failed_cells_out_unless_asked(tmp_path: Path):
    """Three cells: scored, agent_failed (no final model), pending. A rerun re-evaluates
    only the pending one; --include-agent-failed adds the failed agent's cell."""
    make_workdir(tmp_path, campaign_config(runs=[1, 2, 3]))
    campaign = load_config_files(tmp_path)
    solved = {"status": "exited", "exit_code": 0, "final_model_files": 1, "description": "exited with code 0"}
    for run, files in (
        (1, {"solve.json": solved, "metrics.json": {"accuracy": 0.5}, "evaluate.json": VOUCHED}),
        (2, {"solve.json": {**solved, "final_model_files": 0}}),
    ):
        d = campaign.cell_dir(Cell("exit0", "fake", "m1", "0.0005", 0, run))
        d.mkdir(parents=True)
        for name, record in files.items():
            (d / name).write_text(json.dumps(record))
    cell = "results/cells/exit0/fake/m1/0.0005h-0gpu-run{}/metrics.json"
    assert _targets(tmp_path) == [cell.format(3)]
    assert _targets(tmp_path, "--include-agent-failed") == [cell.format(2), cell.format(3)]
    grid = subprocess.run(
        [sys.executable, "-m", "ptb_harness", "status", "--workdir", str(tmp_path)], capture_output=True, text=True
    ).stdout
    assert "1 cells are agent_failed: final, left out of --targets" in grid


def test_cells_read_by_threads_come_back_in_order_and_equal_to_one_thread(tmp_path: Path):
    """The pool only changes who waits on the filesystem, never what is read or its order."""
    from ptb_harness.results.outcome import cell_outcomes

    dirs = []
    for i in range(300):  # several chunks; every third scored, every fifth missing
        d = tmp_path / f"c{i}"
        dirs.append(str(d))
        if i % 5 == 0:
            continue
        d.mkdir()
        if i % 3 == 0:  # scored: solve.json, and the evaluate.json that vouches for metrics.json
            data = json.dumps({"accuracy": i / 1000}).encode()
            (d / "metrics.json").write_bytes(data)
            (d / "solve.json").write_text(json.dumps({"final_model_files": 1, "description": "exited 0"}))
            digest = hashlib.sha256(data).hexdigest()
            ev = {"status": "scored", "accuracy": i / 1000, "metrics_sha256": digest}
            (d / "evaluate.json").write_text(json.dumps(ev))
        else:
            (d / "solve.json").write_text(json.dumps({"final_model_files": 0, "description": f"exited {i}"}))
    one = cell_outcomes(dirs, threads=1)
    assert cell_outcomes(dirs, threads=16) == one
    assert [o[:2] for o in cell_outcomes(dirs, threads=16, all_records=False)] == [o[:2] for o in one]
    assert one[3][:2] == ("scored", "accuracy 0.003") and one[5][0] == "pending" and one[1][0] == "agent_failed"


#: evidence an agent shaped: a final_model file name with a newline, a forged status line,
#: ESC sequences (window title, erase line), a bidi override and an undecodable byte
HOSTILE_NAME = "w.bin\n  scored       forged: accuracy 1.0\x1b]0;pwned\x07\x1b[2K\rFAKE STATUS\u202e|\udcff"


def hostile_cell(workdir: Path) -> Path:
    """A cell whose solve.json names the agent's hostile file (as delivery refuses a link)."""
    campaign = load_config_files(workdir)
    d = campaign.cell_dir(Cell("exit0", "fake", "m1", "0.0005", 0, 1))
    d.mkdir(parents=True)
    problem = f"final_model/{HOSTILE_NAME} is a symbolic link; only regular files and directories are delivered"
    solve = {"status": "exited", "exit_code": 0, "final_model_files": 0, "description": "exited with code 0"}
    (d / "solve.json").write_text(json.dumps({**solve, "agent_problem": problem}))
    return d


def test_status_prints_agent_text_as_one_escaped_line(tmp_path: Path):
    make_workdir(tmp_path, campaign_config())
    hostile_cell(tmp_path)
    base = [sys.executable, "-m", "ptb_harness", "status", "--workdir", str(tmp_path)]
    out = subprocess.run(base, capture_output=True, check=True).stdout
    assert b"\x1b" not in out and b"\r" not in out and b"\x07" not in out and "\u202e".encode() not in out
    listed = [line for line in out.decode().splitlines() if "final_model/" in line]
    assert listed == [
        "  agent_failed results/cells/exit0/fake/m1/0.0005h-0gpu-run1: agent exited with code 0; final_model/w.bin"
        "\\n  scored       forged: accuracy 1.0\\x1b]0;pwned\\x07\\x1b[2K\\rFAKE STATUS\\u202e|\\udcff"
        " is a symbolic link; only regular files and directories are delivered"
    ]
    data = json.loads(subprocess.run([*base, "--json"], capture_output=True, check=True).stdout)
    evidence = data["cells"][0]["evidence"]
    assert HOSTILE_NAME.replace("\udcff", "\ufffd") in evidence  # the text itself, valid Unicode


def test_status_is_the_same_with_its_index_without_it_and_after_cells_change_under_it(tmp_path: Path):
    """The index serves a scored cell only while the files it was read from keep their
    identity: a record rewritten in place with the same size and mtime (its ctime moves),
    a judgement added, a metrics.json removed, a broken index: each time status with the
    index equals status without it."""
    from ptb_harness.results.status import campaign_status
    from ptb_harness.results.status_index import STATUS_INDEX

    campaign, dirs = scored_campaign(tmp_path, 6)

    def both() -> list[dict]:
        with_index = [s.as_dict() for s in campaign_status(campaign)]
        assert with_index == [s.as_dict() for s in campaign_status(campaign, use_index=False)]
        return with_index

    first = both()
    assert (campaign.results_dir / STATUS_INDEX).is_file() and {s["outcome"] for s in first} == {"scored"}
    assert both() == first  # served from the index
    # rewritten in place: same size, mtime set back (the ctime cannot be)
    rewrite_in_place(dirs[0] / "metrics.json", json.dumps({"accuracy": 0.7}))
    after = both()
    assert after[0]["outcome"] != "scored" and after[1:] == first[1:]
    # a judgement that flags a cell; a metrics.json gone
    (dirs[1] / "judgement.json").write_text(json.dumps({"verdict": "flagged"}))
    (dirs[2] / "metrics.json").unlink()
    after = both()
    assert after[1]["flag"] and after[2]["outcome"] != "scored" and after[3:] == first[3:]
    # a broken index is ignored and rewritten
    (campaign.results_dir / STATUS_INDEX).write_text("{not json")
    assert both() == after
    assert json.loads((campaign.results_dir / STATUS_INDEX).read_text())["cells"]


def test_agent_failed_cells_are_kept_only_while_their_records_alone_decide_them(tmp_path: Path):
    """An agent_failed cell is final, so the index keeps it as it keeps a scored one and
    serves it until its records change; one whose evaluate state says it runs (a process's
    liveness decided it) is read again every time. Status equals status without the index."""
    import os
    import socket

    from ptb_harness.results.status import campaign_status
    from ptb_harness.results.status_index import STATUS_INDEX

    campaign, dirs = scored_campaign(tmp_path, 4)
    no_model = {"status": "exited", "exit_code": 1, "final_model_files": 0, "description": "exited with code 1"}
    for d in dirs[1:3]:
        (d / "metrics.json").unlink()
        (d / "evaluate.json").unlink()
        (d / "solve.json").write_text(json.dumps(no_model))
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that runs nothing of ours any more
    state = {"stage": "evaluate", "state": "running", "host": socket.gethostname(), "pid": gone.pid, "started_at": "t0"}
    (dirs[2] / "evaluate.state.json").write_text(json.dumps(state))

    def both() -> list[dict]:
        with_index = [s.as_dict() for s in campaign_status(campaign)]
        assert with_index == [s.as_dict() for s in campaign_status(campaign, use_index=False)]
        return with_index

    first = both()
    assert [s["outcome"] for s in first] == ["scored", "agent_failed", "agent_failed", "scored"]
    kept = json.loads((campaign.results_dir / STATUS_INDEX).read_text())["cells"]
    assert [entry[1]["outcome"] for entry in kept.values()] == ["scored", "agent_failed", "scored"]
    assert both() == first  # served from the index
    # the failed agent's record replaced (a new file, as the harness writes): read again
    replaced = dirs[1] / "solve.json.tmp"
    replaced.write_text(json.dumps({**no_model, "agent_problem": "the agent's CLI was not found"}))
    os.replace(replaced, dirs[1] / "solve.json")
    after = both()
    assert "not found" in after[1]["evidence"] and after[0] == first[0] and after[2:] == first[2:]


def test_an_index_edited_by_hand_is_a_miss_never_a_crash_or_a_status(tmp_path: Path):
    """Entries under the current key whose fields are not exactly status's (an unknown
    field, a missing one, a wrong type, an outcome it does not keep), an index that is a
    link to another file or nested past the parser's depth: each is read as no entry, and
    status equals status without the index, with no traceback."""
    import os

    from ptb_harness.results.status import campaign_status
    from ptb_harness.results.status_index import STATUS_INDEX

    campaign, _ = scored_campaign(tmp_path, 5)
    index_path = campaign.results_dir / STATUS_INDEX
    plain = [s.as_dict() for s in campaign_status(campaign, use_index=False)]
    assert [s.as_dict() for s in campaign_status(campaign)] == plain  # writes the index
    written = json.loads(index_path.read_text())
    rels = list(written["cells"])
    assert len(rels) == 5
    forged = json.loads(index_path.read_text())
    edits = [
        lambda f: f.update(target="/etc/passwd"),  # a field CellStatus has but the index may not set
        lambda f: f.pop("evidence"),
        lambda f: f.update(metrics_present="yes"),
        lambda f: f.update(outcome="running"),  # an outcome the index never keeps
        lambda f: f.update(flag=["contamination"]),
    ]
    for rel, edit in zip(rels, edits, strict=True):
        edit(forged["cells"][rel][1])
    index_path.write_text(json.dumps(forged))
    assert [s.as_dict() for s in campaign_status(campaign)] == plain
    # and the index is rewritten with the cells' true fields
    assert json.loads(index_path.read_text())["cells"] == written["cells"]

    # an entry that would skip the lookup of its files ("-": not read from; its sig that
    # of the dir alone), then one of them rewritten: the entry is a miss, not a stale status
    from ptb_harness.results import cell_index

    cell_dir = campaign.results_dir / rels[0]
    unchecked = json.loads(index_path.read_text())
    dir_only = cell_index._digest([cell_index._identity(os.lstat(cell_dir))])
    unchecked["cells"][rels[0]][0] = dir_only
    unchecked["cells"][rels[0]][2] = "-" * len(unchecked["cells"][rels[0]][2])
    index_path.write_text(json.dumps(unchecked))
    rewrite_in_place(cell_dir / "metrics.json", json.dumps({"accuracy": 0.7}))
    plain = [s.as_dict() for s in campaign_status(campaign, use_index=False)]
    assert plain[0]["outcome"] != "scored"
    assert [s.as_dict() for s in campaign_status(campaign)] == plain

    # a link: not followed (the file it names could be anything), status as without it
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(forged))
    index_path.unlink()
    os.symlink(elsewhere, index_path)
    assert [s.as_dict() for s in campaign_status(campaign)] == plain
    # nested past the parser's depth
    index_path.unlink()
    index_path.write_text("[" * 100_000 + "]" * 100_000)
    assert [s.as_dict() for s in campaign_status(campaign)] == plain
