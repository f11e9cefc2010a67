"""GPU reap timing, shared by `bench/run_all.py --only gpu` and tests/gpu/gpu_checks.py.

It spawns `nvidia-smi` (the way shell harnesses decide what to kill) to compare with the
harness's NVML query: a benchmark, so it lives here and not in the harness, which never
calls nvidia-smi (tests/unit/test_gpu.py checks that).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from ptb_harness.gpu.nvml import Gpu, list_processes
from ptb_harness.gpu.reap import choose_victims

SMI_QUERY = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"]


def time_reap_decision(nvml: Any, gpus: Sequence[Gpu], calls: int = 20) -> tuple[float, float]:
    """Median seconds of one reap decision (list the GPUs' processes through NVML, choose
    the victims; nothing is signalled) and of one `nvidia-smi` process query."""
    nv, smi = [], []
    for _ in range(calls):
        t = time.perf_counter()
        choose_victims(list_processes(nvml, gpus), [g.uuid for g in gpus], "own", os.getuid())
        nv.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run(SMI_QUERY, capture_output=True, check=True)
        smi.append(time.perf_counter() - t)
    return statistics.median(nv), statistics.median(smi)
