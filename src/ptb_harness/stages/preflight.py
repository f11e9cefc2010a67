"""CUDA preflight, before the agent's clock starts: run in the agent's own sandbox, so it
sees exactly the GPUs the agent will see, it checks that exactly the expected number is
visible and that each can allocate and write memory."""

from __future__ import annotations

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
