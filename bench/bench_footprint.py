"""The harness's footprint during a solve: the CPU of every process the harness runs beside
the agent, while the agent does nothing, as a share of one core (issue 59).

    python bench/bench_footprint.py [--sleep 60] [--before COMMIT] [--json OUT]

One judged cell through the real Snakemake on the local profile with site.runtime bwrap
and site.network internet (so slirp4netns runs), its agent's entry routed through the
cell's LLM gateway (agent.json "llm"), the judge on (so the evidence recorder runs, with
a 200-sample test set): the agent only sleeps (``--sleep`` seconds), then leaves a model.
Only the solve is run (the cell's solve.json is the target); the judge's endpoint is
never called.

From the moment the agent's ``sleep`` is seen, and 5 s after it (the recorder's and the
gateway's start are over), /proc/PID/stat of every process under the Snakemake process
is read twice, ``--sleep`` - 15 s apart; each process's CPU time (user + system) used in
between over the wall time between is its share of a core. Processes are named by what
they are: the evidence recorder, the LLM gateway, slirp4netns, bwrap (the sandbox's own
processes), the solve job (the Python process that runs the stage: the GPU monitor, where
there are GPUs, is a thread of it), Snakemake's main process, and the agent (everything
bwrap runs, here bash and sleep; not the harness's).

``--before COMMIT`` (repeatable) runs the same cell again with that commit's src/ first on
PYTHONPATH (`git archive`; the workflow and profile are this checkout's), and prints them
all side by side: the harness before and after a change, measured in one run.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from ptb_harness.runtime.procs import ProcStat, read_proc_stat  # noqa: E402

HOURS = 0.05  # 180 s: room for the sleep, the sandbox's start and the model's delivery
CELL = f"results/cells/sleeper/fake/m1/{HOURS}h-0gpu-run1"
SETTLE_S = 5.0
SAMPLES = [f"sample {i}: how many apples does orchard {i} hold after {3 * i + 7} are picked today?" for i in range(200)]
AGENT = {
    "llm": {"protocol": "anthropic", "base_url_env": "ANTHROPIC_BASE_URL", "default_base_url": "http://127.0.0.1:9"}
}
SOLVE_SH = """#!/usr/bin/env bash
sleep {sleep:g}
mkdir -p final_model && echo '{{"score": 0.75}}' > final_model/config.json
"""
EVALUATE = "print('never run: the bench stops after the solve')\n"
#: the harness's processes, by the module a Python process runs (``-m``) or the executable
MODULES = {"ptb_harness.stages.evidence_recorder": "evidence recorder", "ptb_harness.gateway": "LLM gateway"}
EXECUTABLES = {"slirp4netns": "slirp4netns", "bwrap": "bwrap (the sandbox's own processes)", "nsenter": "nsenter"}
AGENT_NAME = "agent (inside bwrap: bash, sleep)"
SNAKEMAKE_MAIN = "Snakemake's main process"
SOLVE_JOB = "solve job (the stage; the GPU monitor's thread where there are GPUs)"


def make_campaign(root: Path, sleep: float) -> tuple[Path, Path]:
    """The campaign dir and its profile (the local profile, bwrap with slirp4netns)."""
    workdir, profile = root / "campaign", root / "profile"
    agent = workdir / "agents" / "sleeper"
    agent.mkdir(parents=True)
    (agent / "agent.json").write_text(json.dumps(AGENT))
    (agent / "api_keys.json").write_text(json.dumps(["ANTHROPIC_API_KEY"]))
    (agent / "solve.sh").write_text(SOLVE_SH.format(sleep=sleep))
    task = workdir / "tasks" / "fake"
    task.mkdir(parents=True)
    (task / "evaluate.py").write_text(EVALUATE)
    (task / "benchmark.txt").write_text("fake benchmark\n")
    (task / "info.json").write_text(json.dumps({"judge": {"test_set": {"path": "test.jsonl", "fields": ["q"]}}}))
    (task / "test.jsonl").write_text("".join(json.dumps({"q": s}) + "\n" for s in SAMPLES))
    (workdir / "models" / "m1").mkdir(parents=True)
    (workdir / "models" / "m1" / "config.json").write_text("{}")
    endpoint = {"base_url": "http://127.0.0.1:9/v1", "model": "never-called"}
    config = {
        "agents": ["sleeper"],
        "tasks": ["fake"],
        "models": [{"name": "m1", "path": "models/m1"}],
        "hours": [HOURS],
        "num_gpus": [0],
        "runs": [1],
        "solve": {"timeout_margin_minutes": 0, "kill_grace_seconds": 2},
        "leaderboard": {"rules": "custom"},
        "judge": {"enabled": True, "endpoint": endpoint},
    }
    (workdir / "config").mkdir()
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    shutil.copytree(REPO / "profiles" / "local", profile)
    site = yaml.safe_load((profile / "site.yaml").read_text())
    site["site"].update(runtime="bwrap", network="internet", tmp_root=str(root / "scratch"))
    (root / "scratch").mkdir()
    (profile / "site.yaml").write_text(yaml.safe_dump(site))
    return workdir, profile


def descendants(root_pid: int) -> dict[int, ProcStat]:
    """Every process under root_pid (itself included), by pid."""
    stats = [s for name in os.listdir("/proc") if name.isdigit() and (s := read_proc_stat(name)) is not None]
    children: dict[int, list[ProcStat]] = defaultdict(list)
    for s in stats:
        children[s.ppid].append(s)
    found, stack = {}, [s for s in stats if s.pid == root_pid]
    while stack:
        s = stack.pop()
        found[s.pid] = s
        stack.extend(children.get(s.pid, []))
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def name_of(pid: int, procs: dict[int, ProcStat], main_pid: int) -> str:
    """What a process is: one of the harness's (by its module or executable) or the agent's
    (anything a bwrap runs but another bwrap)."""
    if pid == main_pid:
        return SNAKEMAKE_MAIN
    argv = cmdline(pid).split(" ")
    exe = os.path.basename(argv[0])
    if exe in EXECUTABLES:
        return EXECUTABLES[exe]
    parent = procs[pid].ppid
    while parent in procs:
        if os.path.basename(cmdline(parent).split(" ")[0]) == "bwrap":
            return AGENT_NAME
        parent = procs[parent].ppid
    module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else None
    if module in MODULES:
        return MODULES[module]
    return SOLVE_JOB if exe.startswith("python") else f"other: {' '.join(argv)[:60]}"


def agent_sleeping(procs: dict[int, ProcStat], sleep: float) -> bool:
    return any(cmdline(pid) == f"sleep {sleep:g}" for pid in procs)


def measure(src: Path | None, sleep: float) -> dict:
    """One judged cell's solve; each process's share of a core while the agent slept."""
    with tempfile.TemporaryDirectory(prefix="ptb-footprint-") as tmp:
        workdir, profile = make_campaign(Path(tmp), sleep)
        path = [str(src)] if src else []
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([*path, *filter(None, [os.environ.get("PYTHONPATH")])]),
            "CONDOR_CONFIG": os.devnull,
            "ANTHROPIC_API_KEY": "sk-bench-footprint-never-sent",
        }
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(REPO / "Snakefile"),
            "--directory",
            str(workdir),
            "--profile",
            str(profile),
            f"{CELL}/solve.json",
        ]
        log = open(Path(tmp) / "snakemake.log", "w")  # noqa: SIM115
        main = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir)
        try:
            deadline = time.monotonic() + 120
            while not agent_sleeping(descendants(main.pid), sleep):
                if main.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the agent never started:\n{(Path(tmp) / 'snakemake.log').read_text()[-3000:]}")
                time.sleep(0.2)
            time.sleep(SETTLE_S)
            first, t0 = descendants(main.pid), time.monotonic()
            time.sleep(max(sleep - SETTLE_S - 10, 5))
            second, wall = descendants(main.pid), time.monotonic() - t0
            names = {pid: name_of(pid, second, main.pid) for pid in second}
            code = main.wait(timeout=300)
        finally:
            if main.poll() is None:
                main.terminate()
                main.wait()
            log.close()
        if code != 0:
            raise SystemExit(f"the solve failed:\n{(Path(tmp) / 'snakemake.log').read_text()[-3000:]}")
        evidence = json.loads((workdir / CELL / "evidence.json").read_text())
    share: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for pid, after in second.items():
        before = first.get(pid)
        used = after.cpu_ticks - (before.cpu_ticks if before and before.start_ticks == after.start_ticks else 0)
        share[names[pid]] += used / os.sysconf("SC_CLK_TCK") / wall
        count[names[pid]] += 1
    return {
        "window_s": round(wall, 2),
        "share": {k: round(v, 5) for k, v in share.items()},
        "processes": dict(count),
        "recorder_cpu_seconds_whole_solve": evidence.get("cpu_seconds"),
        "recorder_seconds_whole_solve": evidence.get("seconds"),
    }


def before_src(tmp: Path, commit: str) -> Path:
    """That commit's src/ and the schema beside it (the harness reads it from there)."""
    cmd = ["git", "-C", str(REPO), "archive", commit, "src", "config/config.schema.yaml"]
    data = subprocess.run(cmd, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(tmp, filter="data")
    return tmp / "src"


def table(runs: dict[str, dict]) -> list[str]:
    labels = list(runs)
    names = sorted({n for r in runs.values() for n in r["share"]}, key=lambda n: (n == AGENT_NAME, n))
    lines = [
        "| process: share of one core | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for n in names:
        lines.append(f"| {n} | " + " | ".join(f"{r['share'].get(n, 0.0):.2%}" for r in runs.values()) + " |")
    harness = [sum(v for k, v in r["share"].items() if k != AGENT_NAME) for r in runs.values()]
    lines.append("| **the harness, all together** | " + " | ".join(f"**{h:.2%}**" for h in harness) + " |")
    lines.append("| window measured | " + " | ".join(f"{r['window_s']:.1f} s" for r in runs.values()) + " |")
    lines.append(
        "| evidence.json: recorder CPU / its life | "
        + " | ".join(
            f"{r['recorder_cpu_seconds_whole_solve']} s / {r['recorder_seconds_whole_solve']} s" for r in runs.values()
        )
        + " |"
    )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sleep", type=float, default=60.0, help="seconds the agent sleeps (default 60)")
    ap.add_argument(
        "--before",
        action="append",
        default=[],
        help="also run the cell with this commit's src/ (git archive); repeatable",
    )
    ap.add_argument("--json", type=Path, help="write the measurements here too")
    args = ap.parse_args()
    if args.sleep < 20:
        ap.error("--sleep: at least 20 s (5 s settle, 10 s for the end, a window of 5 s or more)")
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="ptb-footprint-src-") as tmp:
        for commit in args.before:
            runs[commit] = measure(before_src(Path(tmp) / commit, commit), args.sleep)
        cmd = ["git", "-C", str(REPO), "describe", "--always", "--dirty"]
        head = subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
        runs[f"now ({head or 'this tree'})"] = measure(None, args.sleep)
    print("\n".join(table(runs)))
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
