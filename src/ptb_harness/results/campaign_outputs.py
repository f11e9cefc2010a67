"""The collect pipeline, assembled once: every campaign-wide output of collect from what
exists on disk, to the paths named in ``core.layout.COLLECT_OUTPUTS``. The collect rule's
job (workflow/scripts/collect.py) and `ptb-harness collect` both call
``write_campaign_outputs`` and differ only in how they report it (a log, the terminal).

In order: the tables (cells, leaderboard CSV and Markdown), the plots, the leaderboard
page (which embeds the leaderboard and heatmap plots), where the hours went per stage,
and the GPU views and the viewer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.core.cell_files import BENCHMARKED_STAGES
from ptb_harness.core.records import atomic_write_text
from ptb_harness.core.text import csv_text
from ptb_harness.results.campaign_views import ViewsSummary, write_views
from ptb_harness.results.collect import write_tables
from ptb_harness.results.leaderboard import held_lines, leaderboard_html
from ptb_harness.results.outcome import MARKS
from ptb_harness.results.plots import write_plots
from ptb_harness.results.stage_benchmarks import hours_line, stage_hours


@dataclass(frozen=True)
class CampaignOutputs:
    """What collect wrote, for its callers' summary lines."""

    table: pd.DataFrame
    board: pd.DataFrame
    plots: list[Path]
    views: ViewsSummary
    hours: pd.DataFrame

    def outcome_counts(self) -> dict[str, int]:
        return self.table["outcome"].value_counts().to_dict()

    def held_lines(self) -> list[str]:
        """The entries the judges' verdicts keep off the ranking, one line each."""
        return held_lines(self.board)

    def hours_line(self) -> str:
        return hours_line(self.hours)


def write_campaign_outputs(campaign: Campaign, paths: Mapping[str, Path]) -> CampaignOutputs:
    """Every output of collect, each written atomically; returns what was written."""
    table, board, weights = write_tables(campaign, paths)
    plots = write_plots(table, board, paths)
    atomic_write_text(paths["leaderboard_html"], leaderboard_html(board, weights, table, plots[:2]))
    # the judge's rows only where the campaign has judges
    stages = [s for s in BENCHMARKED_STAGES if s != "judge" or campaign.settings.judge.enabled]
    hours = stage_hours(table, list(MARKS), stages)
    atomic_write_text(paths["stage_hours"], csv_text(hours))
    views = write_views(table, paths, campaign.results_dir, f"campaign {campaign.name}")
    return CampaignOutputs(table=table, board=board, plots=plots, views=views, hours=hours)
