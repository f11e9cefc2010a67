"""Real-GPU checks of the GPU layer, run as root on a machine with NVIDIA GPUs:

    PYTHONPATH=src python3 tests/gpu/gpu_checks.py [--user ptbgpu2]

It creates a second Unix user, starts CUDA processes as root and as that user, and runs
`ptb-harness reap` in each mode as each user, checking after every step exactly which
processes died. Only processes this script started are ever in scope of a kill: before
it starts, it refuses to run if any other process is on the GPUs. Prints one line per
check and a timing of the reap decision (NVML) against spawning nvidia-smi. Exit 1 on
any failed check.
"""

from __future__ import annotations

import argparse
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HOLD_GPU = (
    "import torch, time, sys; x = torch.ones(1 << 26, device='cuda:' + sys.argv[1]); "
    "torch.cuda.synchronize(); print('ready', flush=True); time.sleep(900)"
)
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


def as_user(user: str | None, argv: list[str]) -> list[str]:
    return argv if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--", *argv]


def env_for(user: str | None) -> dict[str, str]:
    # no GPU set from the environment: each reap names its set with --gpus
    prefixes = ("CUDA_VISIBLE", "NVIDIA_VISIBLE", "SLURM", "_CONDOR")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["PYTHONPATH"] = f"{REPO / 'src'}:{env.get('PYTHONPATH', '')}"
    if user is not None:
        env["HOME"] = f"/tmp/{user}-home"
        Path(env["HOME"]).mkdir(exist_ok=True)
        os.chown(env["HOME"], pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    return env


def start_holder(user: str | None, gpu: int = 0) -> subprocess.Popen:
    p = subprocess.Popen(
        as_user(user, [sys.executable, "-c", HOLD_GPU, str(gpu)]),
        stdout=subprocess.PIPE,
        text=True,
        env=env_for(user),
        cwd="/tmp",
    )
    assert p.stdout is not None
    line = p.stdout.readline().strip()
    if line != "ready":
        raise SystemExit(f"CUDA holder as {user or 'root'} did not start: {line!r}")
    return p


def reap_cli(user: str | None, *args: str) -> subprocess.CompletedProcess:
    argv = as_user(user, [sys.executable, "-m", "ptb_harness", "reap", "--wait", "30", *args])
    res = subprocess.run(argv, capture_output=True, text=True, env=env_for(user), cwd="/tmp")
    print(f"  $ {'runuser ' + user + ' ' if user else ''}ptb-harness reap {' '.join(args)}")
    for line in (res.stdout + res.stderr).strip().splitlines():
        print(f"    {line}")
    return res


def alive(p: subprocess.Popen) -> bool:
    return p.poll() is None


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:  # only the holders this script started
        if alive(p):
            p.kill()
            p.wait()


def scope_checks(gpus, user: str, procs: list[subprocess.Popen]) -> None:
    """With two GPUs: the cell's set is GPU 1; nothing on GPU 0 may ever die."""
    g1 = gpus[1]
    for ids in ("1", g1.uuid, g1.uuid[:12]):
        root0, user0 = start_holder(None, 0), start_holder(user, 0)
        root1, user1 = start_holder(None, 1), start_holder(user, 1)
        procs += [root0, user0, root1, user1]
        reap_cli(None, "--mode", "all", "--gpus", ids)
        check(
            not alive(root1) and not alive(user1) and alive(root0) and alive(user0),
            f"all, cell set {ids!r}: both holders on GPU 1 died; both on GPU 0 survived",
        )
        root1, user1 = start_holder(None, 1), start_holder(user, 1)
        procs += [root1, user1]
        reap_cli(None, "--mode", "own", "--gpus", ids)
        check(
            not alive(root1) and alive(user1) and alive(root0) and alive(user0),
            f"own as root, cell set {ids!r}: only root's holder on GPU 1 died",
        )
        reap_cli(user, "--mode", "own", "--gpus", ids)
        check(
            not alive(user1) and alive(root0) and alive(user0),
            f"own as {user}, cell set {ids!r}: only {user}'s holder on GPU 1 died; GPU 0 untouched",
        )
        stop([root0, user0])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--user", default="ptbgpu2")
    args = ap.parse_args()
    import pynvml

    sys.path.insert(0, str(REPO / "bench"))
    from gpu_timing import time_reap_decision

    from ptb_harness.gpu.nvml import list_gpus, list_processes, load_nvml

    nvml = load_nvml()
    if nvml is None:
        print("no NVIDIA driver")
        return 1
    gpus = list_gpus(nvml)
    print(f"GPUs: {[(g.index, g.uuid, g.name) for g in gpus]}; driver {pynvml.nvmlSystemGetDriverVersion()}")
    before = list_processes(nvml, gpus)
    if before:
        print(f"refusing: processes not started by this script are on the GPUs: {[p.describe() for p in before]}")
        return 1
    try:
        pwd.getpwnam(args.user)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", args.user], check=True)
    user = args.user
    uid2 = pwd.getpwnam(user).pw_uid
    gpu0 = gpus[0]
    procs: list[subprocess.Popen] = []
    try:
        root_a, user_a = start_holder(None), start_holder(user)
        procs += [root_a, user_a]
        time.sleep(1)
        seen = {p.pid: p for p in list_processes(nvml, gpus)}
        check(
            root_a.pid in seen and user_a.pid in seen and seen[user_a.pid].uid == uid2 and seen[root_a.pid].uid == 0,
            f"NVML lists both holders with their owners: {[seen[p].describe() for p in seen]}",
        )

        for ids in ("0", gpu0.uuid, gpu0.uuid[:12]):
            res = reap_cli(None, "--mode", "own", "--gpus", ids, "--dry-run")
            check(
                f"would kill 1: {root_a.pid}" in res.stdout and alive(root_a) and alive(user_a),
                f"dry run, own, as root, GPU set {ids!r}: names only root's holder; nothing died",
            )
        res = reap_cli(None, "--mode", "none", "--gpus", "0")
        check(alive(root_a) and alive(user_a), "mode none: nothing died")
        res = reap_cli(None, "--mode", "all", "--gpus", "0", "--dry-run")
        check(
            alive(root_a) and alive(user_a) and "would kill 2" in res.stdout, "dry run, all: names both; nothing died"
        )

        res = reap_cli(user, "--mode", "own", "--gpus", "0")
        time.sleep(0.5)
        check(not alive(user_a) and alive(root_a), f"own as {user}: only {user}'s holder died; root's survived")

        user_b = start_holder(user)
        procs.append(user_b)
        res = reap_cli(None, "--mode", "own", "--gpus", gpu0.uuid)
        time.sleep(0.5)
        check(not alive(root_a) and alive(user_b), f"own as root: only root's holder died; {user}'s survived")

        root_b = start_holder(None)
        procs.append(root_b)
        res = reap_cli(None, "--mode", "all", "--gpus", gpu0.uuid[:12])
        time.sleep(0.5)
        check(not alive(root_b) and not alive(user_b), "all as root on the cell's GPU: both holders died")
        check(not list_processes(nvml, gpus), "and their memory is released: no process left on the GPU")

        res = reap_cli(None, "--mode", "all")
        check(res.returncode != 0 and "gpu_scope: node" in res.stdout + res.stderr, "all with no GPU set: refused")

        if len(gpus) >= 2:
            scope_checks(gpus, user, procs)

        # timing: the reap decision (list + choose) through NVML vs one nvidia-smi spawn
        holder = start_holder(user)
        procs.append(holder)
        m_nv, m_smi = time_reap_decision(nvml, [gpu0])
        print(
            f"TIMING reap decision via NVML: median {m_nv * 1e3:.2f} ms; nvidia-smi spawn: median {m_smi * 1e3:.1f} ms;"
        )
        print(f"TIMING ratio nvidia-smi / NVML = {m_smi / m_nv:.0f}x (20 calls each, 1 process on the GPU)")
    finally:
        stop(procs)
    print(f"{len(failures)} failed" if failures else "all GPU checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
