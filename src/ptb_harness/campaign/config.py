"""Load a campaign: the order of the steps, nothing else. Used by the Snakefile and by
every command-line entry, so a campaign is checked the same way whether it is planned,
run, collected or inspected:

1. the campaign file merged in (``campaign.reader.merge_campaign_file``);
2. the schema, which fills in every default (``core.schema``);
3. the typed campaign, its grid checked (``campaign.reader``);
4. the checks that read agents, tasks and the cache (``campaign.checks``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.checks import (
    check_campaign,
    check_data,
    check_grader_keys,
    check_local_models,
    check_results_dir,
    check_sandbox_host,
    check_templates,
)
from ptb_harness.campaign.reader import campaign_from_config, merge_campaign_file
from ptb_harness.core.records import read_yaml_mapping
from ptb_harness.core.schema import SCHEMA_PATH, validate_schema


def load_config(
    config: dict[str, Any], workdir: str | Path = ".", schema: Path = SCHEMA_PATH, for_run: bool = False
) -> Campaign:
    """The whole check, in order. Mutates ``config`` (defaults filled in) and returns the
    campaign. ``for_run``: the workflow will write results, so the results dir must be
    writable (read-only commands such as status need not)."""
    merge_campaign_file(config)
    validate_schema(config, schema)
    campaign = campaign_from_config(config, Path(workdir).resolve())
    check_campaign(campaign)
    check_grader_keys(campaign)
    if for_run:
        check_results_dir(campaign)
    check_templates(campaign)
    if for_run:
        check_sandbox_host(campaign)
        # before any GPU hour: what the scorer will read offline is there
        check_data(campaign)
        check_local_models(campaign)
    return campaign


def campaign_with_defaults(config: dict[str, Any], workdir: str | Path = ".") -> Campaign:
    """A campaign from a config that sets some keys, the schema's defaults for the rest,
    without the semantic checks (its agents and tasks need not exist): for tests and tools
    that need settings, not a runnable campaign."""
    config = copy.deepcopy(config)
    validate_schema(config)
    return campaign_from_config(config, Path(workdir))


def load_config_files(
    workdir: str | Path = ".", profile: str | Path | None = None, campaign: str | None = None
) -> Campaign:
    """Load a campaign the way Snakemake does, for commands that run outside it.

    Order (later wins): <workdir>/config/config.yaml, the profile's site.yaml, then the
    campaign file, exactly as with `snakemake --profile P --config campaign=FILE`.
    """
    workdir = Path(workdir).resolve()
    config = read_yaml_mapping(workdir / "config" / "config.yaml", "config")
    if profile is not None:
        site_file = Path(profile) / "site.yaml"
        if site_file.exists():
            config.update(read_yaml_mapping(site_file, "profile"))
    if campaign:
        config.update(campaign=campaign)
    return load_config(config, workdir)
