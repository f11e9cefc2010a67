# Snakemake job: the campaign's tables, plots, stage hours, GPU views and viewer
# (see ptb_harness.results.campaign_outputs; `ptb-harness collect` writes the same).
from pathlib import Path

from ptb_harness.campaign.reader import campaign_from_config
from ptb_harness.results.campaign_outputs import write_campaign_outputs
from ptb_harness.workflow_job import stage

with stage(snakemake.log[0], "collect") as log:
    # the rule's outputs are named as in ptb_harness.core.layout.COLLECT_OUTPUTS
    paths = {name: Path(path) for name, path in snakemake.output.items()}
    campaign = campaign_from_config(snakemake.config, Path.cwd())
    written = write_campaign_outputs(campaign, paths)
    log.info("%d cells tabulated: %s; %d plots", len(written.table), written.outcome_counts(), len(written.plots))
    log.info("%s", written.views.summary())
    log.info("%s", written.hours_line())
    for line in written.held_lines():  # entries the judges' verdicts keep off the ranking
        log.warning("%s", line)
