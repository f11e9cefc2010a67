"""The bwrap sandbox's cost per launch: the old argv (PID and IPC namespaces only, issue
23's "before") against the new one (own user namespace, capabilities dropped, own UTS,
cgroup and network namespaces, /proc/sys read-only, GPU fence), with site.network none
and internet (the slirp4netns launcher), and a bare `true` as the floor. A cell launches
two sandboxes (its agent and its scorer; a GPU cell a third for the CUDA preflight), so
the added cost per cell is twice the added cost per launch. Run through
`python bench/run_all.py --only sandbox`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

#: the flags issue 23 replaced, and what it added to the view
OLD_ISOLATION = ["--die-with-parent", "--unshare-pid", "--unshare-ipc"]
ADDED_VIEW = ["--ro-bind", "/proc/sys", "/proc/sys"]


def launches(tmp: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """label -> (argv, env) of a sandbox running `true`, for each variant."""
    from ptb_harness.campaign.config import campaign_with_defaults
    from ptb_harness.runtime.sandbox import LaunchRequest, Sandbox, bwrap_isolation
    from ptb_harness.runtime.userns import bwrap_version

    home, job_tmp = tmp / "home", tmp / "tmp"
    (home / "task").mkdir(parents=True, exist_ok=True)
    job_tmp.mkdir(exist_ok=True)
    request = LaunchRequest(role="agent", command=["true"], job_home=home, job_tmp=job_tmp, workdir="task", env={})
    host = {"PATH": os.environ["PATH"]}
    out = {}
    for network in ("none", "internet"):
        site = campaign_with_defaults({"site": {"runtime": "bwrap", "network": network}}).settings.site.runtime
        launch = Sandbox(site, host).launch(request)
        out[f"new bwrap, network {network}"] = (launch.argv, launch.env)
    argv, env = out["new bwrap, network none"]
    isolation = bwrap_isolation(bwrap_version(argv[0]))
    rest = argv[1 + len(isolation) :]
    at = next(i for i in range(len(rest)) if rest[i : i + 3] == ADDED_VIEW)
    out["old bwrap (pid, ipc only)"] = ([argv[0], *OLD_ISOLATION, *rest[:at], *rest[at + 3 :]], env)
    out["no sandbox (floor)"] = (["true"], env)
    return out


def _once(argv: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - t


def measure(rounds: int) -> dict[str, float]:
    """Median wall seconds of each variant, the variants interleaved round by round (the
    machine's load changes alike for all)."""
    with tempfile.TemporaryDirectory(prefix="ptb-bench-sandbox-") as d:
        variants = launches(Path(d))
        times: dict[str, list[float]] = {label: [] for label in variants}
        for _ in range(rounds):
            for label, (argv, env) in variants.items():
                times[label].append(_once(argv, env))
    return {label: statistics.median(ts) for label, ts in times.items()}


if __name__ == "__main__":
    for label, s in measure(10).items():
        print(f"{label:<32} {s * 1000:7.1f} ms")
