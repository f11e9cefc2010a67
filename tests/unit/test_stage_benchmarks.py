"""Where a campaign's hours go: Snakemake's benchmark files read bounded and link-safe, and
the hours per stage and outcome computed by hand. (A real run's benchmarks:
tests/workflow/test_pipeline.py::test_solve_json_records_what_the_agent_did.)"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd
import pytest

from ptb_harness.core.cell_files import stage_benchmark
from ptb_harness.results.stage_benchmarks import (
    MAX_BENCHMARK_BYTES,
    STAGE_BENCHMARK_COLUMNS,
    cell_stage_benchmarks,
    hours_line,
    read_benchmark,
    stage_hours,
)

HEAD = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time"
#: Snakemake's --benchmark-extended columns after the plain ones
EXTENDED = "\tjobid\trule_name\twildcards\tparams\tthreads\tcpu_usage\tresources\tinput_size_mb"


def bench(path: Path, line: str, head: str = HEAD) -> Path:
    path.write_text(f"{head}\n{line}\n")
    return path


@pytest.mark.parametrize(
    ("head", "line", "expected"),
    [
        (HEAD, "7200.50\t2:00:00\t5120.25\t9000\t1\t1\t0\t0\t80\t21600.00", (7200.5, 21600.0, 5120.25)),
        (HEAD + EXTENDED, "60\t0:01:00\t10\t1\t1\t1\t0\t0\t1\t30\t1\tsolve\t{}\t{}\t4\t99\t{}\t0", (60.0, 30.0, 10.0)),
        # a job shorter than the first sample: Snakemake writes NA for what it measures
        (HEAD, "0.29\t0:00:00\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA", (0.29, None, None)),
        # a value no job has is unknown, never a number
        (HEAD, "-1\t0:00:00\tnan\t1\t1\t1\t0\t0\t0\tinf", (None, None, None)),
        (HEAD, "12", (12.0, None, None)),  # a short line: the rest unknown
    ],
)
def test_a_benchmark_reads_as_wall_cpu_and_rss(tmp_path, head, line, expected):
    got = read_benchmark(bench(tmp_path / "b.tsv", line, head))
    assert (got["wall_s"], got["cpu_s"], got["max_rss_mb"]) == expected


def test_what_is_no_benchmark_reads_as_none(tmp_path):
    real = bench(tmp_path / "real.tsv", "1\t0:00:01\t1\t1\t1\t1\t0\t0\t0\t1")
    (tmp_path / "link.tsv").symlink_to(real)
    (tmp_path / "big.tsv").write_text(HEAD + "\n" + "1\t" * MAX_BENCHMARK_BYTES)
    (tmp_path / "dir.tsv").mkdir()
    os.mkfifo(tmp_path / "fifo.tsv")  # never waited on
    bench(tmp_path / "other.tsv", "1\t2", head="time\tmemory")
    (tmp_path / "header_only.tsv").write_text(HEAD + "\n")
    for name in ("missing", "link", "big", "dir", "fifo", "other", "header_only"):
        assert read_benchmark(tmp_path / f"{name}.tsv") is None, name
    assert read_benchmark(real) is not None


def test_a_cell_reads_only_the_benchmarks_its_listing_names(tmp_path):
    bench(tmp_path / stage_benchmark("solve"), "3600\t1:00:00\t2048\t1\t1\t1\t0\t0\t1\t7200")
    bench(tmp_path / stage_benchmark("evaluate"), "600\t0:10:00\t4096\t1\t1\t1\t0\t0\t1\t600")
    listed = {stage_benchmark("solve")}  # evaluate's is on disk but was not listed
    got = cell_stage_benchmarks(str(tmp_path), listed)
    assert list(got) == list(STAGE_BENCHMARK_COLUMNS)
    assert (got["solve_wall_s"], got["solve_cpu_s"], got["solve_max_rss_mb"]) == (3600.0, 7200.0, 2048.0)
    assert got["evaluate_wall_s"] is None and got["judge_wall_s"] is None
    assert set(cell_stage_benchmarks(str(tmp_path), None).values()) == {None}


def test_hours_per_stage_and_outcome_by_hand():
    def cell(outcome, solve=None, evaluate=None):
        row = dict.fromkeys(STAGE_BENCHMARK_COLUMNS)
        row["outcome"] = outcome
        for stage, values in (("solve", solve), ("evaluate", evaluate)):
            if values:
                row[f"{stage}_wall_s"], row[f"{stage}_cpu_s"], row[f"{stage}_max_rss_mb"] = values
        return row

    table = pd.DataFrame(
        [
            cell("scored", (7200, 14400, 1000), (1800, 1800, 3000)),
            cell("scored", (3600, 3600, 2000), (1800, 900, 500)),
            cell("agent_failed", (3600, 1800, 500)),  # its evaluate failed: no benchmark
            cell("pending"),  # never ran
        ]
    )
    hours = stage_hours(table, ["scored", "agent_failed", "infra_failed", "pending"], ["solve", "evaluate"])
    got = {(r.stage, r.outcome): r for r in hours.itertuples()}
    # outcomes in the order given, only those the campaign has, then all
    assert [o for s, o in got if s == "solve"] == ["scored", "agent_failed", "pending", "all"]
    total_wall = (7200 + 3600 + 3600 + 1800 + 1800) / 3600  # 5 h over both stages
    solve = got["solve", "all"]
    assert (solve.cells, solve.measured, solve.wall_h, solve.cpu_h, solve.max_rss_mb) == (4, 3, 4.0, 5.5, 2000)
    assert solve.wall_share == pytest.approx(4.0 / total_wall)
    scored = got["evaluate", "scored"]
    assert (scored.cells, scored.measured, scored.wall_h, scored.cpu_h, scored.max_rss_mb) == (2, 2, 1.0, 0.75, 3000)
    assert got["solve", "agent_failed"].wall_h == 1.0 and got["solve", "agent_failed"].wall_share == 0.2
    # unscored cells in rows of their own: measured 0 and unknown hours, never 0 h
    for key in (("evaluate", "agent_failed"), ("evaluate", "pending"), ("solve", "pending")):
        assert got[key].measured == 0 and math.isnan(got[key].wall_h) and math.isnan(got[key].max_rss_mb), key
    assert hours_line(hours) == (
        "hours per stage: solve 4.00 h wall, 5.50 h CPU (3 of 4 cells); evaluate 1.00 h wall, 0.75 h CPU (2 of 4 cells)"
    )


def test_a_campaign_with_no_benchmark_says_so():
    table = pd.DataFrame([{"outcome": "pending", **dict.fromkeys(STAGE_BENCHMARK_COLUMNS)}])
    hours = stage_hours(table, ["scored", "pending"])
    assert list(hours["outcome"]) == ["pending", "all"] * 3 and hours["wall_share"].isna().all()
    assert hours_line(hours) == "hours per stage: solve not measured; evaluate not measured; judge not measured"
