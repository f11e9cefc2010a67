"""CUDA preflight, before the agent's clock starts: run in the agent's own sandbox, so it
sees exactly the GPUs the agent will see, it checks that exactly the expected number is
visible and that each can allocate and write memory."""

from __future__ import annotations

import logging
import socket

from ptb_harness.core.cell_files import PREFLIGHT, Preflight
from ptb_harness.core.errors import HarnessError
from ptb_harness.stages.solve_run import HfView, SolveRun

log = logging.getLogger("ptb_harness.stages.solve")

#: Run as ``python -c PREFLIGHT_CODE <expected>``; prints one PREFLIGHT line.
PREFLIGHT_CODE = r"""
import sys
expected = int(sys.argv[1])
try:
    import torch
except Exception as e:
    print(f"PREFLIGHT FAIL: torch is not importable in the sandbox ({e})"); sys.exit(2)
visible = torch.cuda.device_count()
if visible != expected:
    print(f"PREFLIGHT FAIL: {visible} GPUs visible, expected {expected}"); sys.exit(3)
names = []
for i in range(visible):
    try:
        x = torch.full((1 << 20,), 1.0, device=f"cuda:{i}")
        x.mul_(2.0)
        total = x.sum().item()
    except Exception as e:
        print(f"PREFLIGHT FAIL: GPU {i} cannot allocate and write: {e}"); sys.exit(4)
    if total != 2.0 * (1 << 20):
        print(f"PREFLIGHT FAIL: GPU {i} wrote wrong values ({total})"); sys.exit(5)
    names.append(torch.cuda.get_device_name(i))
print(f"PREFLIGHT OK: {visible} GPUs: {', '.join(names)}")
"""


def preflight_command(expected: int) -> list[str]:
    return ["python", "-c", PREFLIGHT_CODE, str(expected)]


def verdict(output: str) -> tuple[bool, str]:
    """(ok, reason) from the preflight's output."""
    for line in reversed(output.splitlines()):
        if "PREFLIGHT OK" in line:
            return True, line.split("PREFLIGHT OK:", 1)[-1].strip()
        if "PREFLIGHT FAIL" in line:
            return False, line.split("PREFLIGHT FAIL:", 1)[-1].strip()
    tail = output.strip().splitlines()[-1:] or ["no output"]
    return False, f"preflight ended without a verdict: {tail[0][:200]}"


def run_preflight(run: SolveRun, hf_view: HfView) -> None:
    """Check the cell's GPUs in the agent's own sandbox; preflight.json says how it went.
    A failure is the infrastructure's: the job fails (nothing of the cell is lost, the
    agent never started) so a rerun or a scheduler retry tries again."""
    ok, reason = _preflight_verdict(run, hf_view)
    verdict = Preflight(status="ok" if ok else "failed", reason=reason, gpus=run.gpus, host=socket.gethostname())
    verdict.write(run.cell_dir / PREFLIGHT)
    if not ok:
        raise HarnessError(f"CUDA preflight failed, agent not started: {reason}")
    log.info("CUDA preflight: %s", reason)


def _preflight_verdict(run: SolveRun, hf_view: HfView) -> tuple[bool, str]:
    gpu_set, cell = run.gpu_set, run.cell
    ids = gpu_set.sandbox_ids()
    if not gpu_set.driver:
        return False, "no NVIDIA driver on this machine"
    if gpu_set.request.known and len(ids) != cell.num_gpus:
        return False, f"the job was given {len(ids)} GPU(s) by {gpu_set.request.source}, the cell needs {cell.num_gpus}"
    log_path = run.job.harness / "preflight.log"
    timeout_s = run.campaign.settings.site.gpu.preflight_timeout_seconds
    result = run.launch(hf_view, preflight_command(cell.num_gpus)).run(log_path, budget_s=timeout_s, kill_grace_s=5)
    if result.status == "timeout":
        return False, "preflight did not finish in time"
    return verdict(log_path.read_text(errors="replace"))
