"""Helpers of the agent tests: the pinned CLIs (skip with a reason when not installed)
and the scripted model server (a test stand-in, see scripted_server.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))  # scripted_server and protocols/ import each other by name

from ptb_harness.runtime.agent_cli import bin_dir, is_installed  # noqa: E402

#: Where `ptb-harness setup-agents` puts the CLIs by default (.ci/run runs it).
CLI_PREFIX = REPO / "resources" / "agent-cli"
CLI_LOCK = REPO / "agents" / "cli"


def cli_bin(name: str) -> Path:
    """The pinned CLI's executable; without it, skip saying how to install it (fail under CI)."""
    exe = bin_dir(CLI_PREFIX) / name
    if not is_installed(CLI_LOCK, CLI_PREFIX) or not exe.exists():
        why = f"agent CLIs not installed in {CLI_PREFIX}: run `ptb-harness setup-agents`"
        if os.environ.get("CI"):  # CI installs them (.ci/run): a missing CLI there is a failure
            pytest.fail(why)
        pytest.skip(why)
    return exe


# -- one real cell of a shipped agent through the real Snakemake ---------------------------
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import yaml  # noqa: E402
from scripted_server import Plan, ScriptedServer  # noqa: E402

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@dataclass
class CellRun:
    workdir: Path
    cell: Path  # the cell's results dir
    job_root: Path  # tmp_root holding the kept job dir
    server: ScriptedServer
    proxy: ScriptedServer
    plan: Plan
    snakemake: subprocess.CompletedProcess
    seconds: float

    def json(self, name: str) -> dict:
        return json.loads((self.cell / name).read_text())

    def job_dirs(self) -> list[Path]:
        return sorted(self.job_root.glob("ptb-*"))


def run_agent_cell(
    tmp_path: Path,
    agent_dir: str,
    entry: dict,
    plan: Plan,
    protocols: list[str],
    secrets: dict[str, str],
    base_url_env: dict[str, str],
    hours: float = 0.01,
    solve: dict | None = None,
    targets: tuple[str, ...] = (),
    runtime: str = "none",
    task_files: tuple[Path, ...] = (),
) -> CellRun:
    """Run one cell of ``agents/<agent_dir>`` (copied from the repo) against the scripted
    model server (a test stand-in), with every proxy variable pointing at a second
    stand-in that records whatever a CLI would send to any other host (under runtime
    none: a bwrap sandbox, with site.network none, reaches no host but through its
    gateway). ``task_files`` are copied into the task dir (the agent's working dir). Called
    again with the same tmp_path, it reruns the campaign (its config rewritten for the new
    servers and plan): Snakemake redoes what is not done."""
    from conftest import FAKE_EVALUATE, write_task  # the suite's scorer reading final_model

    workdir = tmp_path / "campaign"
    profile = tmp_path / "profile"
    job_root = tmp_path / "scratch"
    if not workdir.exists():
        shutil.copytree(REPO / "agents" / agent_dir, workdir / "agents" / agent_dir)
        write_task(workdir, "fake", FAKE_EVALUATE)
        for f in task_files:
            shutil.copyfile(f, workdir / "tasks" / "fake" / f.name)
        (workdir / "models" / "m1").mkdir(parents=True)
        (workdir / "models" / "m1" / "config.json").write_text('{"score": 0.75}')
        shutil.copytree(REPO / "profiles" / "local", profile)
        site = yaml.safe_load((profile / "site.yaml").read_text())
        job_root.mkdir(exist_ok=True)
        site["site"].update(agent_cli_prefix=str(CLI_PREFIX), tmp_root=str(job_root), keep_job_dir=True)
        site["site"].update(runtime=runtime, network="none" if runtime == "bwrap" else "internet")
        (profile / "site.yaml").write_text(yaml.safe_dump(site))
    with ScriptedServer(plan, protocols) as server, ScriptedServer(Plan("none", []), []) as proxy:
        env_vars = {k: v.replace("{url}", server.url) for k, v in base_url_env.items()}
        env_vars.update(dict.fromkeys(PROXY_VARS, proxy.url))
        env_vars.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        config = {
            "agents": [{**entry, "dir": agent_dir, "env": {**env_vars, **entry.get("env", {})}}],
            "tasks": ["fake"],
            "models": [{"name": "m1", "path": "models/m1"}],
            "hours": [hours],
            "num_gpus": [0],
            "runs": [1],
            "solve": {"timeout_margin_minutes": 0, "kill_grace_seconds": 2, **(solve or {})},
        }
        (workdir / "config").mkdir(exist_ok=True)
        (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))
        env = {**os.environ, **secrets, "CONDOR_CONFIG": os.devnull}
        for k in PROXY_VARS:  # the harness's own environment stays unproxied
            env.pop(k, None)
        cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
        cmd += ["--profile", str(profile)]
        # only these files of the cell (e.g. solve.json, usage.json): no scoring, no tables
        cell_rel = f"results/cells/{entry['name']}/fake/m1/{hours:g}h-0gpu-run1"
        cmd += [f"{cell_rel}/{t}" for t in targets]
        t0 = time.monotonic()
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        seconds = time.monotonic() - t0
    name = entry["name"]
    cell = workdir / "results" / "cells" / name / "fake" / "m1" / f"{hours:g}h-0gpu-run1"
    return CellRun(workdir, cell, job_root, server, proxy, plan, res, seconds)


def gateway_failures(workdir: Path) -> str:
    """Every failed call in the cells' gateway request logs (status, path, error), for a
    failing run's message: a solve the gateway failed says only how many calls failed."""
    lines = []
    for log in sorted(workdir.glob("results/cells/**/llm_log*.jsonl")):
        for line in log.read_text(errors="replace").splitlines():
            call = json.loads(line)
            if call.get("status") != 200:
                fields = ("time", "status", "path", "latency_ms", "error")
                lines.append(f"{log.name}: " + " ".join(str(call.get(f)) for f in fields))
    return "\n".join(lines)


def files_containing(root: Path, needle: str) -> list[Path]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if needle.encode() in path.read_bytes():
                    hits.append(path)
            except OSError:
                pass
    return hits


def processes_under(root: Path) -> list[str]:
    """Live processes whose cwd is inside root (a CLI or a tool call left running)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if cwd.startswith(str(root)):
                found.append(f"{pid} {Path(f'/proc/{pid}/cmdline').read_bytes()[:200]!r}")
    return found
