"""Hostile agents in real campaign runs (`ptb-harness run`, the real Snakemake), under the
isolating runtime `bwrap` and under `none` where the attack applies there.

Each agent is one attack of issue 15, all as cells of ONE campaign per runtime (a run
costs seconds per cell, not per attack). For each: the outcome it gets, that nothing
forged reached the leaderboard, that no host file or secret value reached results, and
that a rerun does not hand the agent a second, silent try.

The scorer of task `fake` is a stand-in that reads the score the agent's model names; a
model can also ask it to misbehave (`scorer_attack`): write a 200 MB metrics file, or one
nested 1,000 deep. That is the hostile scorer, named as such.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import campaign_config, make_workdir, write_agent, write_config, write_task
from conftest import cell_dir as _cell_dir
from hostile import delivered, harness_run, ptb, write_profile

pytestmark = pytest.mark.slow

API_KEY = "sk-test-7Hc2Qm9xLp4Rv8Zt"  # allowlisted to every agent
HOST_ONLY = "db-passwd-91c3e5f7a2"  # in the harness's environment, passed to no agent
HOST_FILE = "host-file-secret-5b2d8e0c4a"  # in a host file an agent links to

#: the hostile scorer stand-in (see the module docstring)
SCORER = """
    import argparse, json, pathlib, sys
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path"); ap.add_argument("--json-output-file")
    ap.add_argument("--max-tokens", type=int)
    a = ap.parse_args()
    cfg = json.loads(pathlib.Path(a.model_path, "config.json").read_text())
    out = pathlib.Path(a.json_output_file)
    if cfg.get("scorer_attack") == "huge":
        with out.open("w") as f:
            f.write('{"accuracy": 0.5, "pad": "')
            for _ in range(200):
                f.write("x" * 1_000_000)
            f.write('"}')
    elif cfg.get("scorer_attack") == "deep":
        out.write_text('{"accuracy": 0.5, "x": ' + "[" * 1000 + "]" * 1000 + "}")
    else:
        out.write_text(json.dumps({"accuracy": cfg.get("score", 0.5)}))
"""
ONE_ATTEMPT = {"evaluate": {"ladder": [{"attempts": 1, "max_tokens": None}]}}
ORIGINAL_SCORER_SHA = hashlib.sha256(__import__("textwrap").dedent(SCORER).encode()).hexdigest()

W = 'W=$(dirname "$(dirname "$MODEL_TO_TRAIN")")\n'  # the campaign dir, found from the model path
#: the agents' budget: enough to write a 60 MB line on a loaded 2-core machine
HOURS = "0.002"
CELL = "results/cells/{agent}/fake/m1/" + HOURS + "h-0gpu-run1"
MODEL = "mkdir -p final_model && echo '{\"score\": %s}' > final_model/config.json\n"

ATTACKS = {
    # forge its own score through the harness's open files, then kill the harness
    "forge_kill": W
    + f'C="$W/{CELL.format(agent="forge_kill")}"\n'
    + """
    ls -l /proc/$PPID/fd/ 2>/dev/null | grep -c results || true
    if [ ! -e "$W/.forge_kill_done" ]; then
        touch "$W/.forge_kill_done" 2>/dev/null
        [ -d "$C" ] && echo '{"accuracy": 1.0}' > "$C/metrics.json" && echo FORGED
        echo $$ > "$W/.forge_kill_pid" 2>/dev/null
        kill -KILL $PPID
        sleep 600  # outlive the harness, where it can
    fi
    """,
    # overwrite another cell's score
    "overwrite_other": W
    + f'V="$W/{CELL.format(agent="exit0")}"\n'
    + """[ -d "$V" ] && echo '{"accuracy": 0.99}' > "$V/metrics.json" && echo OVERWROTE\n"""
    + MODEL % "0.2",
    # patch the scorer in the checkout
    "patch_scorer": W
    + """T="$W/tasks/fake/evaluate.py"
    P='import sys,json\\nf=sys.argv[sys.argv.index("--json-output-file")+1]\\n'
    [ -w "$T" ] && printf "$P"'open(f,"w").write(json.dumps({"accuracy": 1.0}))\\n' > "$T" && echo PATCHED
    """
    + MODEL % "0.3",
    "link_etc": "ln -s /etc final_model\n",
    "link_other_model": W + f'ln -s "$W/{CELL.format(agent="exit0")}/final_model" final_model\n',
    "link_host_secret": MODEL % "0.9" + W + 'ln -s "$W/host_secret.txt" final_model/tokenizer.json\n',
    "link_dev_zero": MODEL % "0.9" + "ln -s /dev/zero final_model/model.safetensors\n",
    "secret_plain": MODEL % "0.9" + 'echo "key=$MY_API_KEY" > final_model/notes.txt\n',
    "secret_base64": MODEL % "0.9" + "printf 'xy%s' \"$MY_API_KEY\" | base64 > final_model/notes.txt\n",
    "deep_json_trace": """
    python -c 'print("{\\"type\\": \\"assistant\\", \\"message\\": " + "[" * 1000 + "]" * 1000 + "}")'
    python -c 'print("[" * 100000 + "]" * 100000)'
    """
    + MODEL % "0.5",
    "huge_line_trace": MODEL % "0.5"
    + """
    python -c 'import sys; sys.stdout.write("{\\"type\\": \\"assistant\\", \\"x\\": \\"" + "a" * 60_000_000 + "\\"}")'
    """,
    "scorer_huge_metrics": 'mkdir -p final_model && echo \'{"scorer_attack": "huge"}\' > final_model/config.json\n',
    "scorer_deep_metrics": 'mkdir -p final_model && echo \'{"scorer_attack": "deep"}\' > final_model/config.json\n',
    # signal everything it can see (bwrap only: under `none` that is every process of the user)
    "kill_everything": "kill -KILL -1 2>/dev/null; kill -TERM 1 2>/dev/null; sleep 0.2\n" + MODEL % "0.6",
    # read the secrets of the process that started it
    "read_parent_environ": "tr '\\0' '\\n' < /proc/$PPID/environ\n" + MODEL % "0.4",
}
#: attacks that need an isolating runtime to be stopped (under `none` they succeed: README)
ISOLATED_ONLY = {"read_parent_environ", "kill_everything"}


def session_alive(sid: int) -> bool:
    """Whether any process of session sid still runs (from /proc; zombies run nothing)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_bytes().rsplit(b")", 1)[1].split()
            if int(fields[3]) == sid and fields[0] != b"Z":
                return True
    return False


def cell_dir(workdir: Path, agent: str) -> Path:
    return _cell_dir(workdir, agent, hours=HOURS)


def expected(runtime: str) -> dict[str, tuple[str, str]]:
    """agent -> (outcome, evidence fragment) after the first run."""
    forge = (
        ("infra_failed", "records disagree (tampered or edited by hand): metrics.json without solve.json")
        if runtime == "none"
        else ("agent_failed", "no final model")
    )
    return {
        "forge_kill": forge,
        "patch_scorer": ("scored", "accuracy 0.3"),
        "link_etc": ("agent_failed", "final_model is a symbolic link to /etc, not a directory; nothing delivered"),
        "link_other_model": ("agent_failed", "final_model is a symbolic link to "),
        "link_host_secret": ("agent_failed", "final_model/tokenizer.json is a symbolic link"),
        "link_dev_zero": ("agent_failed", "final_model/model.safetensors is a symbolic link"),
        "secret_plain": ("agent_failed", "final_model contains the value of MY_API_KEY (in final_model/notes.txt)"),
        "secret_base64": ("agent_failed", "final_model contains the value of MY_API_KEY (base64)"),
        "deep_json_trace": ("scored", "accuracy 0.5"),
        "huge_line_trace": ("scored", "accuracy 0.5"),
        "scorer_huge_metrics": ("infra_failed", "200000028 bytes, more than the 1048576 it may have"),
        "scorer_deep_metrics": ("infra_failed", "JSON nested deeper than 64 levels"),
        "read_parent_environ": ("scored", "accuracy 0.4"),
        "kill_everything": ("scored", "accuracy 0.6"),  # the harness survived it and recorded the cell
        "overwrite_other": ("scored", "accuracy 0.2"),
    }


def outcomes(workdir: Path, profile: Path) -> dict[str, tuple[str, str]]:
    data = json.loads(ptb(workdir, profile, "status", "--json"))
    return {c["agent"]: (c["outcome"], c["evidence"]) for c in data["cells"]}


def files_holding(root: Path, values: list[str]) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            hits += [f"{path.relative_to(root)}: {v}" for v in values if v.encode() in data]
    return hits


@pytest.fixture(scope="module", params=["bwrap", "none"])
def attacked(request, tmp_path_factory):
    runtime = request.param
    root = tmp_path_factory.mktemp(f"attacks-{runtime}")
    workdir = make_workdir(root / "campaign")
    write_task(workdir, "fake", SCORER, ONE_ATTEMPT)
    agents = [a for a in ATTACKS if runtime == "bwrap" or a not in ISOLATED_ONLY]
    for name in agents:
        write_agent(workdir, name, ATTACKS[name])
        (workdir / "agents" / name / "api_keys.json").write_text('["MY_API_KEY"]')
    (workdir / "host_secret.txt").write_text(HOST_FILE)
    write_config(workdir, campaign_config(agents=["exit0", *agents], hours=[float(HOURS)]))
    profile = write_profile(root, runtime=runtime, solve_resources={"cpus": 1}, evaluate_resources={"cpus": 1})
    env = {"MY_API_KEY": API_KEY, "DB_PASSWD": HOST_ONLY}
    run = harness_run(workdir, profile, env=env)
    yield runtime, workdir, profile, env, run
    pidfile = workdir / ".forge_kill_pid"
    if pidfile.exists():  # the orphan the forger left under `none`, if a test did not end it
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.killpg(int(pidfile.read_text()), 9)


def test_every_attack_gets_its_outcome_and_nothing_forged_is_scored(attacked):
    runtime, workdir, profile, _env, run = attacked
    assert run.returncode != 0  # some cells have no score (the run says so) ...
    assert "Traceback" not in run.stderr.replace("Traceback (most recent call last)", "")  # ... none crashed
    seen = outcomes(workdir, profile)
    for agent, (outcome, fragment) in expected(runtime).items():
        if agent in seen:
            assert seen[agent][0] == outcome and fragment in seen[agent][1], (agent, seen[agent])
    # the victim of overwrite_other: scored honestly, or (overwritten after its score) refused
    victim = seen["exit0"]
    assert victim == ("scored", "accuracy 0.75") or "records disagree" in victim[1], victim
    # nothing forged on the leaderboard: no 1.0, no 0.99
    ptb(workdir, profile, "collect")
    board = (workdir / "results/tables/leaderboard.md").read_text()
    assert "| 1.000" not in board and "| 0.990" not in board, board
    with open(workdir / "results/tables/cells.csv") as f:
        scores = {r["agent"]: r["accuracy"] for r in csv.DictReader(f) if r["outcome"] == "scored"}
    assert not {a for a, acc in scores.items() if float(acc) in (1.0, 0.99)}, scores
    # what was refused never reached results: no link, no host file, nothing of /etc
    results = workdir / "results"
    assert not [p for p in results.rglob("*") if p.is_symlink()]
    assert not (cell_dir(workdir, "link_etc") / "final_model" / "passwd").exists()
    for agent in ("link_etc", "link_other_model", "link_host_secret", "link_dev_zero", "secret_plain"):
        assert delivered(cell_dir(workdir, agent)) == [], agent
    assert files_holding(results, [HOST_FILE, HOST_ONLY]) == []
    # the agents' own key: only in the raw trace and transcript (owner-only, never shared)
    shared = [
        h
        for h in files_holding(results, [API_KEY])
        if not h.split(":")[0].endswith(("solve_out.txt", "solve_parsed.txt"))
    ]
    assert shared == []


def test_the_scorer_that_ran_is_the_frozen_one(attacked):
    runtime, workdir, *_ = attacked
    for agent in ("patch_scorer", "exit0", "deep_json_trace"):
        ev = json.loads((cell_dir(workdir, agent) / "evaluate.json").read_text())
        if ev.get("status") == "scored":
            assert ev["scorer"]["evaluate_py_sha256"] == ORIGINAL_SCORER_SHA, agent
            assert ev["scorer"]["task_dir"].startswith(str(workdir / ".ptb-harness")), "read from the snapshot"
    trace = (cell_dir(workdir, "patch_scorer") / "solve_out.txt").read_text()
    assert ("PATCHED" in trace) == (runtime == "none")  # under bwrap the checkout is out of sight


def test_isolation_hides_the_harness_and_its_secrets(attacked):
    runtime, workdir, *_ = attacked
    if runtime != "bwrap":
        pytest.skip("`none` is for trusted agents: they can read the harness's environment (README)")
    trace = (cell_dir(workdir, "read_parent_environ") / "solve_out.txt").read_text()
    assert "MY_API_KEY=" in trace and "PROMPT=" in trace  # its own variables: pid 1 is bwrap
    assert HOST_ONLY not in trace and "DB_PASSWD" not in trace and "PATH=/" in trace
    forge = (cell_dir(workdir, "forge_kill") / "solve_out.txt").read_text()
    assert "FORGED" not in forge
    # its kill of pid 1 (bwrap's init) did nothing: the harness recorded the cell
    solve = json.loads((cell_dir(workdir, "forge_kill") / "solve.json").read_text())
    assert solve["status"] == "timeout" and solve["attempt"] == 1
    for agent in ("overwrite_other", "patch_scorer"):
        assert "OVERWROTE" not in (cell_dir(workdir, agent) / "solve_out.txt").read_text()


def test_hostile_traces_parse_in_flat_memory(attacked):
    _runtime, workdir, *_ = attacked
    for agent in ("deep_json_trace", "huge_line_trace"):
        log = (cell_dir(workdir, agent) / "logs" / "parse_trace.log").read_text()
        assert "Traceback" not in log and len(log.strip().splitlines()) == 1, log[-2000:]
        assert (cell_dir(workdir, agent) / "solve_parsed.txt").exists()
    # the 60 MB one-line trace again, alone, its peak memory measured
    raw = cell_dir(workdir, "huge_line_trace") / "solve_out.txt"
    assert raw.stat().st_size > 60_000_000
    out = workdir / "reparse"
    out.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "ptb_harness", "parse-trace", str(raw), str(out / "p.txt")]
    argv += ["--sanitized-raw", str(out / "s.txt"), "--sanitized-parsed", str(out / "sp.txt")]
    # measured from a small launcher: Linux carries a process's peak RSS across exec, so a
    # child forked straight from this (by now large) pytest would report pytest's size
    res = subprocess.run([sys.executable, "-c", PEAK_RSS, *argv], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    peak_mb = int(res.stdout.split()[-1]) / 1024
    assert peak_mb < 150, f"peak RSS {peak_mb:.0f} MB"


PEAK_RSS = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(usage.ru_maxrss)  # KiB
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_rerun_gives_no_silent_second_try(attacked):
    runtime, workdir, profile, env, _run = attacked
    # the operator restores what the agents changed in the checkout (evaluate.json named it)
    write_task(workdir, "fake", SCORER, ONE_ATTEMPT)

    def one_liner():
        # the documented one-liner, limited to the two cells this test is about (the others
        # would only fail their evaluation again)
        targets = ptb(workdir, profile, "status", "--targets").split()
        keep = [t for t in targets if t == "--forcerun" or "/forge_kill/" in t or "/exit0/" in t]
        return harness_run(workdir, profile, *keep, env=env)

    forge = cell_dir(workdir, "forge_kill")
    if runtime == "none":
        pidfile = workdir / ".forge_kill_pid"
        orphan = int(pidfile.read_text())
        try:
            assert Path(f"/proc/{orphan}").exists(), "the forger outlived its harness (runtime none)"
            refused = one_liner()
            log = (forge / "logs" / "solve.log").read_text()
            assert "ended without a record and its processes still run" in log, log[-2000:]
            assert "not solving it again while it may run" in refused.stderr
            assert not (forge / "solve.json").exists()
        finally:
            # the orphan this test's agent left: its process group (the agent's session,
            # led by the pid it recorded), and nothing else
            with contextlib.suppress(ProcessLookupError):
                os.killpg(orphan, 9)
        for _ in range(300):
            if not session_alive(orphan):
                break
            time.sleep(0.1)
    rerun = one_liner()
    seen = outcomes(workdir, profile)
    assert (forge / "solve.json").exists(), rerun.stderr[-3000:]
    solve = json.loads((forge / "solve.json").read_text())
    if runtime == "none":
        # its second solve is attempt 2, carrying the first's evidence, and the leaderboard says so
        assert solve["attempt"] == 2 and solve["earlier_attempts"][0]["status"] == "died without a record"
        ptb(workdir, profile, "collect")
        board = (workdir / "results/tables/leaderboard.md").read_text()
        assert "## Cells solved more than once" in board and "| forge_kill | fake | m1 |" in board
    else:
        assert solve["attempt"] == 1 and solve["earlier_attempts"] == []
    assert seen["exit0"] == ("scored", "accuracy 0.75")  # the victim, rescored honestly
    assert "Traceback" not in rerun.stderr.replace("Traceback (most recent call last)", "")
