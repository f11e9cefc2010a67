# Snakemake job: raw trace -> readable transcript (see ptb_harness.traces).
from pathlib import Path

from ptb_harness.stage import stage
from ptb_harness.traces import parse_trace_file

with stage(snakemake.log[0], "parse_trace"):  # noqa: F821 (snakemake is injected)
    parse_trace_file(Path(snakemake.input.raw_trace), Path(snakemake.output.parsed))  # noqa: F821
