# Snakemake job: the campaign's tables and plots (see ptb_harness.collect, ptb_harness.plots).
from pathlib import Path

from ptb_harness.campaign import Campaign
from ptb_harness.collect import write_tables
from ptb_harness.plots import write_plots
from ptb_harness.stage import stage

with stage(snakemake.log[0], "collect") as log:  # noqa: F821 (snakemake is injected)
    out = snakemake.output  # noqa: F821
    campaign = Campaign(config=snakemake.config, workdir=Path.cwd())  # noqa: F821
    table, board, weights = write_tables(campaign, Path(out.cells), Path(out.leaderboard_csv), Path(out.leaderboard_md))
    plots = write_plots(
        table, board, weights, Path(out.leaderboard_png).parent, Path(out.gpu_plots), Path(out.leaderboard_html)
    )
    log.info("%d cells tabulated: %s; %d plots", len(table), table["outcome"].value_counts().to_dict(), len(plots))
