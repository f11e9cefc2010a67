# Snakemake job: one cell's raw trace -> its transcript, sanitized copies and usage.json
# (see ptb_harness.stages.parse_trace; `ptb-harness parse-trace` calls the same).
from pathlib import Path

from ptb_harness.stages.parse_trace import run_parse_trace
from ptb_harness.workflow_job import from_snakemake, stage

out = snakemake.output
# the state record (parse_trace.state.json) lives beside the transcript
cell_dir = Path(out.parsed).parent
with stage(snakemake.log[0], "parse_trace", cell_dir) as log:
    campaign, cell = from_snakemake(snakemake)
    stats = run_parse_trace(
        Path(snakemake.input.raw_trace),
        Path(out.parsed),
        agent=campaign.agent(cell.agent),
        required_api_keys=campaign.task(cell.task).required_api_keys,
        sanitized_raw=Path(out.raw_sanitized),
        sanitized_parsed=Path(out.parsed_sanitized),
        usage=Path(out.usage),
        solve_json=Path(snakemake.input.solve_json),
    )
    # one line, however many lines of the trace could not be parsed
    log.info("%s", stats.summary())
