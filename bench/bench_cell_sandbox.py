"""A cell's harness overhead under bwrap, the harness of cec4b27 (issue 23's "before":
bwrap with PID and IPC namespaces only, no cgroup, no rlimits) against the harness now
(own user, network, UTS and cgroup namespaces, slirp4netns with site.network internet,
the cell's cgroup made, probed and removed, every launch confined), in one run.

    python bench/bench_cell_sandbox.py [--rounds 12]

A cell is measured as its two Snakemake jobs, each a fresh Python process timed after
its imports: the campaign loaded and checked as a job does (`load_config(...,
for_run=True)`: each job of a cluster executor runs it, the local executor once per
run), then `run_solve`, or `run_evaluate`. The agent exits at once leaving a one-file
model and the scorer reads it (the tests' fake agent and task), so what is timed is the
harness's own work around them. The variants run interleaved round by round (the
machine's load changes alike for all); medians. Runtime `none` at both commits is
measured too: what the harness changed in between outside the sandbox.

"Before" is the code of commit cec4b27 itself (`git archive`), or the tree named by
PTB_BENCH_BEFORE_TREE (its src/, config/config.schema.yaml and
profiles/local/site.yaml) on a machine without the
history. Needs bwrap (and slirp4netns, nsenter, ip for the internet variant).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BEFORE = "cec4b27"
CELL_DIR = "results/cells/exit0/fake/m1/0.0005h-0gpu-run1"

AGENT = """#!/usr/bin/env bash
mkdir -p final_model && echo '{"score": 0.75}' > final_model/config.json
"""
SCORER = """
import argparse, json, pathlib
ap = argparse.ArgumentParser()
ap.add_argument("--model-path"); ap.add_argument("--json-output-file"); ap.add_argument("--max-tokens", type=int)
a = ap.parse_args()
score = json.loads(pathlib.Path(a.model_path, "config.json").read_text())["score"]
pathlib.Path(a.json_output_file).write_text(json.dumps({"accuracy": score}))
"""
CONFIG = {
    "agents": ["exit0"],
    "tasks": ["fake"],
    "models": [{"name": "m1", "path": "models/m1"}],
    "hours": [0.0005],
    "num_gpus": [0],
    "runs": [1],
}

#: one of a cell's two jobs (solve, evaluate) after its imports, in a process of its own
#: as Snakemake runs it: the campaign loaded and checked, then the stage
DRIVER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from ptb_harness.campaign.cells import Cell
    from ptb_harness.campaign.config import load_config
    from ptb_harness.core.records import read_yaml_mapping
    from ptb_harness.stages.evaluate import run_evaluate
    from ptb_harness.stages.solve import run_solve

    workdir, profile, cell_dir, job = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    os.chdir(workdir)
    if sys.argv[5:] == ["--new-session"]:
        # the old argv with --new-session alone added (see NEW_SESSION_ONLY)
        from ptb_harness.runtime import sandbox

        bwrap = sandbox.Sandbox._bwrap

        def with_new_session(self, *args):
            launch = bwrap(self, *args)
            launch.argv.insert(1, "--new-session")
            return launch

        sandbox.Sandbox._bwrap = with_new_session
    cell = Cell("exit0", "fake", "m1", "0.0005", 0, 1)
    t0 = time.perf_counter()
    config = read_yaml_mapping(workdir / "config" / "config.yaml", "config")
    config.update(read_yaml_mapping(profile / "site.yaml", "profile"))
    campaign = load_config(config, workdir, for_run=True)
    t1 = time.perf_counter()
    if job == "solve":
        cell_dir.mkdir(parents=True)
        run_solve(campaign, cell, solve_json=cell_dir / "solve.json", raw_trace=cell_dir / "solve_out.txt",
                  final_model=cell_dir / "final_model")
    else:
        run_evaluate(campaign, cell, solve_json=cell_dir / "solve.json", final_model=cell_dir / "final_model",
                     metrics_json=cell_dir / "metrics.json")
        metrics = json.loads((cell_dir / "metrics.json").read_text())
        assert metrics["accuracy"] == 0.75, metrics
    t2 = time.perf_counter()
    print(json.dumps({"load_" + job: t1 - t0, job: t2 - t1}))
    """
)

#: the old harness with --new-session alone added to its bwrap argv. At cec4b27 bwrap's
#: child (the sandbox's PID 1) stayed in the launch's process group; re-parented to the
#: harness (a child subreaper) when bwrap exited, it was a zombie in that group until the
#: orphans were reaped, so stop_leftovers waited min(kill_grace, 5 s) on it after every
#: launch. --new-session (issue 23) takes the child out of the group; this variant shows
#: the old isolation's cost without that wait.
NEW_SESSION_ONLY = "before + --new-session only"


def before_tree(tmp: Path) -> Path:
    """src/, the schema and profiles/local/site.yaml of cec4b27 (or PTB_BENCH_BEFORE_TREE)."""
    given = os.environ.get("PTB_BENCH_BEFORE_TREE")
    if given:
        return Path(given)
    out = tmp / "before"
    out.mkdir()
    cmd = ["git", "-C", str(REPO), "archive", BEFORE, "src", "config/config.schema.yaml", "profiles/local/site.yaml"]
    data = subprocess.run(cmd, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(out, filter="data")
    return out


def make_variant(root: Path, tree: Path, runtime: str, network: str | None) -> tuple[Path, Path]:
    """A campaign dir and a profile dir (that commit's local site.yaml, the runtime set)."""
    workdir = root / "campaign"
    (workdir / "agents/exit0").mkdir(parents=True)
    (workdir / "agents/exit0/solve.sh").write_text(AGENT)
    (workdir / "tasks/fake").mkdir(parents=True)
    (workdir / "tasks/fake/evaluate.py").write_text(SCORER)
    (workdir / "tasks/fake/benchmark.txt").write_text("fake benchmark\n")
    (workdir / "models/m1").mkdir(parents=True)
    (workdir / "models/m1/config.json").write_text("{}")
    (workdir / "config").mkdir()
    (workdir / "config/config.yaml").write_text(yaml.safe_dump(CONFIG))
    site = yaml.safe_load((tree / "profiles/local/site.yaml").read_text())
    site["site"]["runtime"] = runtime
    if network is not None:
        site["site"]["network"] = network
    profile = root / "profile"
    profile.mkdir()
    (profile / "site.yaml").write_text(yaml.safe_dump(site))
    return workdir, profile


def variants(tmp: Path) -> dict[str, tuple[Path, Path, Path]]:
    """label -> (src dir, campaign dir, profile dir)."""
    before, after = before_tree(tmp), REPO
    spec = {
        "before: bwrap (cec4b27)": (before, "bwrap", None),
        NEW_SESSION_ONLY: (before, "bwrap", None),
        "after: bwrap, network internet": (after, "bwrap", "internet"),
        "after: bwrap, network none": (after, "bwrap", "none"),
        "before: none": (before, "none", None),
        "after: none": (after, "none", None),
    }
    out = {}
    for i, (label, (tree, runtime, network)) in enumerate(spec.items()):
        workdir, profile = make_variant(tmp / f"v{i}", tree, runtime, network)
        out[label] = (tree / "src", workdir, profile, ["--new-session"] if label == NEW_SESSION_ONLY else [])
    return out


def once(src: Path, workdir: Path, profile: Path, extra: list[str]) -> dict[str, float]:
    """A cell's two jobs, each a process of its own: seconds of each part."""
    shutil.rmtree(workdir / "results", ignore_errors=True)
    # this variant's harness first (the dependencies may come after it, on PYTHONPATH)
    path = os.pathsep.join([str(src), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": path, "CONDOR_CONFIG": os.devnull}
    parts = {}
    for job in ("solve", "evaluate"):
        argv = [sys.executable, "-c", DRIVER, str(workdir), str(profile), str(workdir / CELL_DIR), job, *extra]
        res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            raise RuntimeError(f"{workdir}: the cell's {job} failed ({res.returncode}): {res.stderr[-3000:]}")
        parts |= json.loads(res.stdout.strip().splitlines()[-1])
    return parts


#: label -> each round's seconds of each part and of the cell ("cell": their sum)
Rounds = dict[str, list[dict[str, float]]]


def measure(rounds: int) -> Rounds:
    with tempfile.TemporaryDirectory(prefix="ptb-bench-cell-sandbox-") as d:
        runs = variants(Path(d))
        for run in runs.values():
            once(*run)  # warm: page cache, bytecode
        seen: Rounds = {label: [] for label in runs}
        for _ in range(rounds):
            for label, run in runs.items():
                parts = once(*run)
                seen[label].append({**parts, "cell": sum(parts.values())})
    return seen


def median(seen: Rounds, label: str, part: str = "cell") -> float:
    return statistics.median(r[part] for r in seen[label])


def added(seen: Rounds, new: str, old: str) -> float:
    """The median over rounds of the cell's seconds under ``new`` less under ``old`` in
    the same round (the load drifts between rounds, much less within one)."""
    return statistics.median(n["cell"] - o["cell"] for n, o in zip(seen[new], seen[old], strict=True))


def report(seen: Rounds) -> list[str]:
    lines = [f"{'variant':<32} {'cell':>7} {'load+solve':>11} {'load+evaluate':>14}   (medians, s)"]
    for label in seen:
        solve = median(seen, label, "load_solve") + median(seen, label, "solve")
        evaluate = median(seen, label, "load_evaluate") + median(seen, label, "evaluate")
        lines.append(f"{label:<32} {median(seen, label):7.3f} {solve:11.3f} {evaluate:14.3f}")
    drift = added(seen, "after: none", "before: none")
    lines.append(f"the harness outside the sandbox (runtime none, after - before): {drift:+.3f} s per cell")
    for old in ("before: bwrap (cec4b27)", NEW_SESSION_ONLY):
        for network in ("internet", "none"):
            new = f"after: bwrap, network {network}"
            lines.append(f"added per cell, network {network}, against {old}: {added(seen, new, old):+.3f} s")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=12)
    args = ap.parse_args()
    print(f"cell under bwrap, before ({BEFORE}) and after: {args.rounds} rounds, {os.cpu_count()} cores", flush=True)
    for line in report(measure(args.rounds)):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
