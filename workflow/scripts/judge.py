# Snakemake job: judge one cell (see ptb_harness.stages.judge); judgement.json always, fail closed.
from pathlib import Path

from ptb_harness.stages.judge import run_judge
from ptb_harness.workflow_job import from_snakemake, stage

cell_dir = Path(snakemake.output.judgement).parent
with stage(snakemake.log[0], "judge", cell_dir):
    campaign, cell = from_snakemake(snakemake)
    run_judge(
        campaign,
        cell,
        transcript=Path(snakemake.input.transcript),
        final_model=Path(snakemake.input.final_model),
        judgement_json=Path(snakemake.output.judgement),
    )
