"""Load and validate the campaign configuration: schema first, then semantic checks.

Used by the Snakefile and by every command-line entry, so a campaign is checked the
same way whether it is planned, run, collected or inspected.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ptb_harness.campaign.cells import Campaign, check_campaign, load_campaign_file
from ptb_harness.campaign.graders import check_grader_keys
from ptb_harness.core.errors import ConfigError
from ptb_harness.core.records import read_yaml_mapping

#: The schema ships with the workflow, next to config/config.yaml.
SCHEMA_PATH = Path(__file__).resolve().parents[3] / "config" / "config.schema.yaml"


def _json_path(error: Any) -> str:
    parts = []
    for p in error.absolute_path:
        parts.append(f"[{p}]" if isinstance(p, int) else f".{p}")
    return "".join(parts).lstrip(".") or "(top level)"


def _one_line(error: Any) -> str:
    """A jsonschema ValidationError as one line naming the key."""
    key = _json_path(error)
    if error.validator == "additionalProperties":
        return f"{key}: {error.message}"
    return f"{key}: {error.message.splitlines()[0]}"


def validate_schema(config: dict[str, Any], schema: Path = SCHEMA_PATH) -> None:
    """Validate in place against the JSON schema, filling in defaults (snakemake.utils.validate)."""
    import jsonschema
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    try:
        validate(config, str(schema), set_default=True)
    except WorkflowError as e:
        # the jsonschema error is only kept as the exception's context
        cause = e.__cause__ or e.__context__
        if not isinstance(cause, jsonschema.ValidationError):
            cause = None
        if cause is None:
            raise ConfigError(str(e).splitlines()[0]) from None
        raise ConfigError(_one_line(cause)) from None


def merge_campaign_file(config: dict[str, Any]) -> None:
    """Replace campaign keys with those of ``config['campaign']`` when one is named."""
    path = config.get("campaign")
    if path:
        config.update(load_campaign_file(path))


def load_config(
    config: dict[str, Any], workdir: str | Path = ".", schema: Path = SCHEMA_PATH, for_run: bool = False
) -> Campaign:
    """The whole check, in order. Mutates ``config`` (defaults filled in) and returns the
    campaign. ``for_run``: the workflow will write results, so the results dir must be
    writable (read-only commands such as status need not)."""
    merge_campaign_file(config)
    validate_schema(config, schema)
    campaign = check_campaign(config, Path(workdir).resolve())
    check_grader_keys(config, campaign.agents_dir, campaign.tasks_dir)
    if for_run:
        check_writable_dir(campaign.results_dir, "paths.results_dir")
    return campaign


def check_writable_dir(path: Path, key: str) -> None:
    """The dir exists and is writable, or can be created: else a ConfigError naming key."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{key}: cannot create {path}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{key}: {existing} is not writable (needed for {path})")


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
        config["campaign"] = campaign
    return load_config(config, workdir)
