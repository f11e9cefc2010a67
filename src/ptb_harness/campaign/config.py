"""Load and validate the campaign configuration: schema first, then semantic checks.

Used by the Snakefile and by every command-line entry, so a campaign is checked the
same way whether it is planned, run, collected or inspected.
"""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path
from typing import Any

from ptb_harness.campaign.cells import Campaign
from ptb_harness.campaign.grader_keys import check_grader_keys
from ptb_harness.campaign.scoring import check_data, check_templates
from ptb_harness.campaign.settings import campaign_from_config, check_campaign, merge_campaign_file
from ptb_harness.core.errors import ConfigError
from ptb_harness.core.layout import built_by_workflow
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
    """Validate in place against the JSON schema, filling in defaults (the rule of
    snakemake.utils.validate, which it replaces: that one imports Snakemake's config
    machinery and pandas, most of `ptb-harness status`'s fixed cost)."""
    import jsonschema

    validator = _validator_with_defaults(jsonschema.Draft202012Validator)(_schema(schema))
    error = next(validator.iter_errors(config), None)  # the first, as Validator.validate raises it
    if error is not None:
        raise ConfigError(_one_line(error))


@functools.cache
def _schema(path: Path) -> dict[str, Any]:
    return read_yaml_mapping(path, "schema")


def _validator_with_defaults(validator_class: Any) -> Any:
    """A validator that sets every missing property that has a default before checking it
    (the jsonschema FAQ's recipe, as Snakemake uses it); defaults are copied, so the cached
    schema is never changed through a config."""
    from jsonschema import validators

    check_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: dict, instance: Any, schema: dict) -> Any:
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema and name not in instance:
                    instance[name] = copy.deepcopy(subschema["default"])
        yield from check_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


def load_config(
    config: dict[str, Any], workdir: str | Path = ".", schema: Path = SCHEMA_PATH, for_run: bool = False
) -> Campaign:
    """The whole check, in order. Mutates ``config`` (defaults filled in) and returns the
    campaign. ``for_run``: the workflow will write results, so the results dir must be
    writable (read-only commands such as status need not)."""
    merge_campaign_file(config)
    validate_schema(config, schema)
    campaign = check_campaign(config, Path(workdir).resolve())
    check_grader_keys(campaign)
    problem = campaign.settings.paths.results_problem() if for_run else None
    if problem:
        raise ConfigError(f"paths.results_dir: {problem}")
    check_templates(campaign)
    if for_run:
        # before any cell: this host can make the site's sandbox
        from ptb_harness.runtime.sandbox import Sandbox

        Sandbox(campaign.settings.site.runtime, os.environ).check_host()
        # before any GPU hour: what the scorer will read offline is there
        check_data(campaign)
        check_local_models(campaign)
    return campaign


def check_local_models(campaign: Campaign) -> None:
    """Every local base model exists (else Snakemake would stop later with a multi-line
    MissingInputException), except those a rule of the workflow builds."""
    for i, m in enumerate(campaign.models.values()):
        if m.path is None or built_by_workflow(m.path):
            continue
        path = Path(campaign.model_source(m.name))
        if not path.is_dir():
            what = "is not a directory" if path.exists() else "not found"
            raise ConfigError(f"models[{i}].path: {path} {what}")


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
