# Snakemake job: score one cell's final model (see ptb_harness.stages.evaluate).
from pathlib import Path

from ptb_harness.stages.evaluate import run_evaluate
from ptb_harness.stages.job import from_snakemake, stage

# the state record (evaluate.state.json) lives beside metrics.json
cell_dir = Path(snakemake.output.metrics).parent  # noqa: F821 (snakemake is injected)
with stage(snakemake.log[0], "evaluate", cell_dir):  # noqa: F821
    campaign, cell = from_snakemake(snakemake)  # noqa: F821
    run_evaluate(
        campaign,
        cell,
        solve_json=Path(snakemake.input.solve_json),  # noqa: F821
        final_model=Path(snakemake.input.final_model),  # noqa: F821
        metrics_json=Path(snakemake.output.metrics),  # noqa: F821
    )
