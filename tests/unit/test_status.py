"""`ptb-harness status --targets`: what a rerun is given."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from conftest import campaign_config, make_workdir

from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.config import load_config_files

#: evaluate.json of a scored cell: it vouches for metrics.json {"accuracy": 0.5} by its hash
VOUCHED = {
    "status": "scored",
    "accuracy": 0.5,
    "metrics_sha256": hashlib.sha256(json.dumps({"accuracy": 0.5}).encode()).hexdigest(),
}


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
