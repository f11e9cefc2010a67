# Snakemake job: score one cell's final model (see ptb_harness.stages.evaluate).
from pathlib import Path

from ptb_harness.stages.evaluate import run_evaluate
from ptb_harness.workflow_job import from_snakemake, stage

# the state record (evaluate.state.json) lives beside metrics.json
cell_dir = Path(snakemake.output.metrics).parent
with stage(snakemake.log[0], "evaluate", cell_dir):
    campaign, cell = from_snakemake(snakemake)
    run_evaluate(
        campaign,
        cell,
        solve_json=Path(snakemake.input.solve_json),
        final_model=Path(snakemake.input.final_model),
        metrics_json=Path(snakemake.output.metrics),
    )
