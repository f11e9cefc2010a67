# Snakemake job: the campaign's tables and plots (see ptb_harness.results.collect, ptb_harness.results.plots).
from pathlib import Path

from ptb_harness.campaign.cells import Campaign
from ptb_harness.results.collect import write_tables
from ptb_harness.results.plots import write_plots
from ptb_harness.stages.job import stage

with stage(snakemake.log[0], "collect") as log:
    out = snakemake.output
    campaign = Campaign(config=snakemake.config, workdir=Path.cwd())
    table, board, weights = write_tables(campaign, Path(out.cells), Path(out.leaderboard_csv), Path(out.leaderboard_md))
    plots = write_plots(
        table, board, weights, Path(out.leaderboard_png).parent, Path(out.gpu_plots), Path(out.leaderboard_html)
    )
    log.info("%d cells tabulated: %s; %d plots", len(table), table["outcome"].value_counts().to_dict(), len(plots))
