# Snakemake job: score one cell's final model (see ptb_harness.evaluate).
from pathlib import Path

from ptb_harness.evaluate import run_evaluate
from ptb_harness.stage import from_snakemake, stage

with stage(snakemake.log[0], "evaluate"):  # noqa: F821 (snakemake is injected)
    campaign, cell = from_snakemake(snakemake)  # noqa: F821
    run_evaluate(
        campaign,
        cell,
        solve_json=Path(snakemake.input.solve_json),  # noqa: F821
        final_model=Path(snakemake.input.final_model),  # noqa: F821
        metrics_json=Path(snakemake.output.metrics),  # noqa: F821
    )
