"""GPU use per cell and stage from gpu_monitor.csv, and its cache. The CSVs here are
written by the test in the GPU monitor's format (a stand-in for NVML samples: no GPU)."""

from __future__ import annotations

import os

import pytest

from ptb_harness.results.gpu_usage import GpuUsageCache, gpu_usage_rows, lowest_utilisation, summarize

HEAD = "time,stage,gpu_index,gpu_uuid,utilization_pct,memory_used_mib,memory_total_mib,power_w,n_processes,pids\n"


def sample(t: int, stage: str, uuid: str, util: str, mem_mib: int) -> str:
    return f"2026-11-30T12:{t // 60:02d}:{t % 60:02d}Z,{stage},0,{uuid},{util},{mem_mib},81559,300,1,42\n"


def write_monitor(path, rows: list[str]) -> None:
    path.write_text(HEAD + "".join(rows))


def test_summary_by_stage_two_gpus(tmp_path):
    # solve: 2 GPUs, 4 samples each, 30 s apart -> each GPU 90 s + one 30 s step = 2 min
    rows = []
    for k in range(4):
        rows.append(sample(30 * k, "solve", "GPU-a", ["0", "100", "50", "2"][k], 1024 * (k + 1)))
        rows.append(sample(30 * k, "solve", "GPU-b", "100", 2048))
    rows.append(sample(200, "evaluate", "GPU-a", "", 512))  # MIG: no utilisation
    write_monitor(tmp_path / "m.csv", rows)
    stages = {s.stage: s for s in summarize(tmp_path / "m.csv")}
    solve = stages["solve"]
    assert (solve.samples, solve.gpus) == (8, 2)
    assert solve.gpu_hours == pytest.approx(2 * 120 / 3600, abs=1e-4)
    assert solve.util_mean == pytest.approx((0 + 100 + 50 + 2 + 4 * 100) / 8)
    assert solve.util_median == 100.0
    assert solve.idle_fraction == pytest.approx(2 / 8)  # 0 and 2 are <= 5 %
    assert solve.mem_peak_gib == 4.0
    ev = stages["evaluate"]
    assert ev.util_mean is None and ev.idle_fraction is None and ev.mem_peak_gib == 0.5


def test_cut_off_and_empty_monitors(tmp_path):
    write_monitor(tmp_path / "cut.csv", [sample(0, "solve", "GPU-a", "10", 100), "2026-11-30T12:00:30Z,sol"])
    [solve] = summarize(tmp_path / "cut.csv")
    assert solve.samples == 1
    (tmp_path / "empty.csv").write_text("")
    assert summarize(tmp_path / "empty.csv") == []
    (tmp_path / "foreign.csv").write_text("a,b\n1,2\n")
    assert summarize(tmp_path / "foreign.csv") == []


def test_cache_reads_only_changed_monitors(tmp_path):
    cells = []
    for i in range(3):
        d = tmp_path / f"cell{i}"
        d.mkdir()
        write_monitor(d / "gpu_monitor.csv", [sample(0, "solve", "GPU-a", str(10 * i), 100)])
        cells.append({"cell_dir": str(d), "agent": "a", "outcome": "scored"})
    cells.append({"cell_dir": str(tmp_path / "no-monitor"), "agent": "a", "outcome": "pending"})
    cache_file = tmp_path / "cache.json"
    first = GpuUsageCache(cache_file)
    rows = gpu_usage_rows(cells, first)
    first.save(c["cell_dir"] for c in cells)
    assert (first.misses, len(rows)) == (3, 3)
    # one monitor grows: only it is read again, and its new numbers show
    write_monitor(tmp_path / "cell1" / "gpu_monitor.csv", [sample(0, "solve", "GPU-a", "90", 100)] * 2)
    os.utime(tmp_path / "cell1" / "gpu_monitor.csv", ns=(1, 2))
    second = GpuUsageCache(cache_file)
    rows = gpu_usage_rows(cells, second)
    assert (second.hits, second.misses) == (2, 1)
    assert [r["util_mean"] for r in rows] == [0.0, 90.0, 20.0]
    assert [r["cell_dir"] for r in lowest_utilisation(rows, 2)] == [cells[0]["cell_dir"], cells[2]["cell_dir"]]


def test_damaged_cache_is_recomputed(tmp_path):
    d = tmp_path / "cell"
    d.mkdir()
    write_monitor(d / "gpu_monitor.csv", [sample(0, "solve", "GPU-a", "10", 100)])
    (tmp_path / "cache.json").write_text('{"version": 1, "cells": [')
    cache = GpuUsageCache(tmp_path / "cache.json")
    assert gpu_usage_rows([{"cell_dir": str(d)}], cache)[0]["util_mean"] == 10.0
    assert cache.misses == 1


def test_a_link_or_a_broken_monitor_is_never_a_traceback(tmp_path):
    linked, nul = tmp_path / "linked", tmp_path / "nul"
    linked.mkdir()
    nul.mkdir()
    (linked / "gpu_monitor.csv").symlink_to("/dev/zero")
    (nul / "gpu_monitor.csv").write_bytes(HEAD.encode() + sample(0, "solve", "GPU-a", "10", 100).encode() + b"\0" * 64)
    cells = [{"cell_dir": str(linked)}, {"cell_dir": str(nul)}]
    rows = gpu_usage_rows(cells, GpuUsageCache(tmp_path / "cache.json"))
    assert [(r["cell_dir"], r["samples"]) for r in rows] == [(str(nul), 1)]
