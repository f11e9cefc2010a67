# Snakemake job: the campaign's tables (see ptb_harness.collect).
from pathlib import Path

from ptb_harness.campaign import Campaign
from ptb_harness.collect import write_tables
from ptb_harness.stage import stage

with stage(snakemake.log[0], "collect") as log:  # noqa: F821 (snakemake is injected)
    out = snakemake.output  # noqa: F821
    table = write_tables(
        Campaign(config=snakemake.config, workdir=Path.cwd()),  # noqa: F821
        Path(out.cells),
        Path(out.leaderboard_csv),
        Path(out.leaderboard_md),
    )
    log.info("%d cells tabulated: %s", len(table), table["outcome"].value_counts().to_dict())
