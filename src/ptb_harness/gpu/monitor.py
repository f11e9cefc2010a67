"""Sample the cell's GPUs into a CSV while a stage runs: one NVML query per GPU and
sample, in a thread of the harness (no subprocess per sample)."""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ptb_harness.core.cell_files import GPU_MONITOR
from ptb_harness.gpu.nvml import Gpu, device_handle, list_processes
from ptb_harness.runtime.procs import iso_utc

COLUMNS = [
    "time",
    "stage",
    "gpu_index",
    "gpu_uuid",
    "utilization_pct",
    "memory_used_mib",
    "memory_total_mib",
    "power_w",
    "n_processes",
    "pids",
]


def sample(nvml: Any, gpus: Sequence[Gpu], stage: str) -> list[dict[str, Any]]:
    rows = []
    now = iso_utc(time.time())
    procs = list_processes(nvml, gpus, owner=lambda pid: (None, "?", "?"))
    for g in gpus:
        h = device_handle(nvml, g)
        mem = nvml.nvmlDeviceGetMemoryInfo(h)
        try:
            util = nvml.nvmlDeviceGetUtilizationRates(h).gpu
        except Exception:  # MIG instances report no utilization
            util = None
        try:
            power = round(nvml.nvmlDeviceGetPowerUsage(h) / 1000.0, 1)
        except Exception:  # not supported on every board
            power = None
        pids = sorted(p.pid for p in procs if p.gpu_uuid == g.uuid)
        rows.append(
            {
                "time": now,
                "stage": stage,
                "gpu_index": g.index,
                "gpu_uuid": g.uuid,
                "utilization_pct": util,
                "memory_used_mib": round(mem.used / 2**20),
                "memory_total_mib": round(mem.total / 2**20),
                "power_w": power,
                "n_processes": len(pids),
                "pids": " ".join(map(str, pids)),
            }
        )
    return rows


class GpuMonitor:
    """``with GpuMonitor(nvml, gpus, csv_path, "solve", 30): ...`` appends a row per GPU
    every interval (and one at start and end). A no-op without NVML, GPUs or interval."""

    def __init__(self, nvml: Any | None, gpus: Sequence[Gpu], path: Path, stage: str, interval_s: float):
        self.nvml, self.gpus, self.path, self.stage, self.interval = nvml, list(gpus), Path(path), stage, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = 0

    @classmethod
    def for_cell(
        cls, nvml: Any | None, gpus: Sequence[Gpu], cell_dir: Path, stage: str, interval_s: float
    ) -> GpuMonitor:
        """The monitor of a cell's stage: its gpu_monitor.csv, at the site's interval."""
        return cls(nvml, gpus, Path(cell_dir) / GPU_MONITOR, stage, interval_s)

    @property
    def active(self) -> bool:
        return self.nvml is not None and bool(self.gpus) and self.interval > 0

    def _write(self, writer: csv.DictWriter, f: Any) -> None:
        try:
            writer.writerows(sample(self.nvml, self.gpus, self.stage))
            f.flush()
            self.samples += 1
        except Exception:  # a failed sample must never fail the cell
            pass

    def _run(self) -> None:
        new = not self.path.exists()
        with open(self.path, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            if new:
                writer.writeheader()
            self._write(writer, f)
            while not self._stop.wait(self.interval):
                self._write(writer, f)
            self._write(writer, f)

    def __enter__(self) -> GpuMonitor:
        if self.active:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._thread = threading.Thread(target=self._run, name="gpu-monitor", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=30)
