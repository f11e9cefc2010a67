"""The configuration schema (``config/config.schema.yaml``): the one place a key's type,
allowed values, description and default are written. The campaign's reader validates
against it and fills the defaults in; a layer below the campaign that needs a knob's
values or default (the GPU reap policy, the CLI's ``reap``) reads them here, never a copy.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
from pathlib import Path
from typing import Any

from ptb_harness.core.errors import ConfigError
from ptb_harness.core.records import read_yaml_mapping

#: The schema is config/config.schema.yaml, next to config/config.yaml; the package holds it
#: as its data (a link to it in a checkout, a copy in a wheel), so an installed harness
#: finds it from any directory.
SCHEMA_PATH = Path(str(importlib.resources.files("ptb_harness.core") / "config.schema.yaml"))


@functools.cache
def load_schema(path: Path = SCHEMA_PATH) -> dict[str, Any]:
    return read_yaml_mapping(path, "schema")


def site_knob(name: str) -> dict[str, Any]:
    """The schema of a site knob (``site.<name>``): its type, enum, default, description."""
    return load_schema(SCHEMA_PATH)["properties"]["site"]["properties"][name]


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

    validator = _validator_with_defaults(jsonschema.Draft202012Validator)(load_schema(schema))
    error = next(validator.iter_errors(config), None)  # the first, as Validator.validate raises it
    if error is not None:
        raise ConfigError(_one_line(error))


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
