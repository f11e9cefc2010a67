# Snakemake job: run one cell's agent (see ptb_harness.stages.solve).
from pathlib import Path

from ptb_harness.stages.solve import run_solve
from ptb_harness.workflow_job import from_snakemake, stage

# the state record (solve.state.json) lives beside solve.json
cell_dir = Path(snakemake.output.solve_json).parent
with stage(snakemake.log[0], "solve", cell_dir):
    campaign, cell = from_snakemake(snakemake)
    out = snakemake.output
    run_solve(
        campaign,
        cell,
        solve_json=Path(out.solve_json),
        raw_trace=Path(out.raw_trace),
        final_model=Path(out.final_model),
    )
