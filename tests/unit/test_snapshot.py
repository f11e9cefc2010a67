import os
import shutil
import subprocess
import sys

from conftest import REPO

from ptb_harness.runtime.snapshot import harness_digest, make_snapshot


def copy_harness(dest):
    for rel in ("Snakefile", "workflow", "src", "config", "agents", "tasks"):
        src = REPO / rel
        if src.is_dir():
            shutil.copytree(src, dest / rel, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def test_digest_follows_content_and_snapshots_are_made_once(tmp_path):
    checkout = copy_harness(tmp_path / "checkout")
    digest = harness_digest(checkout)
    assert digest == harness_digest(REPO), "the digest is over content, not location"
    snap = make_snapshot(tmp_path / "work", checkout)
    assert snap.name == digest[:16] and (snap / "src/ptb_harness/stages/solve.py").is_file()
    assert harness_digest(snap) == digest
    (snap / "marker").write_text("x")
    assert make_snapshot(tmp_path / "work", checkout) == snap and (snap / "marker").exists(), "reused"
    (checkout / "workflow/rules/solve.smk").write_text(
        (checkout / "workflow/rules/solve.smk").read_text() + "\n# edit\n"
    )
    assert harness_digest(checkout) != digest
    assert make_snapshot(tmp_path / "work", checkout) != snap


def test_code_runs_from_the_snapshot_and_records_it(tmp_path):
    snap = make_snapshot(tmp_path / "work", copy_harness(tmp_path / "checkout"))
    env = {**os.environ, "PYTHONPATH": str(snap / "src"), "PTB_HARNESS_GIT": "abc123+dirty"}
    code = "import json, ptb_harness.runtime.snapshot as s; print(json.dumps(s.provenance()))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    import json

    prov = json.loads(out)
    assert prov["snapshot"] == str(snap) and prov["git"] == "abc123+dirty" and prov["digest"] == harness_digest(snap)


def test_the_campaign_reads_agents_and_tasks_frozen_under_run(tmp_path, monkeypatch):
    checkout = copy_harness(tmp_path / "checkout")
    work = tmp_path / "work"
    (work / "tasks" / "t").mkdir(parents=True)
    (work / "tasks" / "t" / "evaluate.py").write_text("print('honest')\n")
    snap = make_snapshot(work, checkout)
    assert (snap / "tasks/t/evaluate.py").read_text() == "print('honest')\n"
    assert not (snap / "tasks/arith").exists(), "the workdir's tasks, not the checkout's"
    (work / "tasks" / "t" / "evaluate.py").write_text("print('patched')\n")  # an agent patches the scorer
    from ptb_harness.campaign.config import campaign_with_defaults
    from ptb_harness.runtime.snapshot import SNAPSHOT_ENV

    monkeypatch.setenv(SNAPSHOT_ENV, str(snap))
    assert campaign_with_defaults({}, work).task_dir("t") == snap / "tasks/t"
    monkeypatch.delenv(SNAPSHOT_ENV)
    assert campaign_with_defaults({}, work).task_dir("t") == (work / "tasks/t").resolve()
    # a changed task is a new snapshot (the digest covers it)
    assert make_snapshot(work, checkout) != snap
