# Snakemake job: the campaign's tables, plots, GPU views and viewer (see ptb_harness.results).
from pathlib import Path

from ptb_harness.campaign.reader import campaign_from_config
from ptb_harness.results.campaign_views import write_views
from ptb_harness.results.collect import write_tables
from ptb_harness.results.leaderboard import held_lines
from ptb_harness.results.plots import write_plots
from ptb_harness.stages.job import stage

with stage(snakemake.log[0], "collect") as log:
    # the rule's outputs are named as in ptb_harness.core.layout.COLLECT_OUTPUTS
    paths = {name: Path(path) for name, path in snakemake.output.items()}
    campaign = campaign_from_config(snakemake.config, Path.cwd())
    table, board, weights = write_tables(campaign, paths)
    plots = write_plots(table, board, weights, paths)
    views = write_views(table, paths, campaign.results_dir, f"campaign {campaign.name}")
    log.info("%d cells tabulated: %s; %d plots", len(table), table["outcome"].value_counts().to_dict(), len(plots))
    log.info("%s", views.summary())
    for line in held_lines(board):  # entries the judges' verdicts keep off the ranking
        log.warning("%s", line)
