"""The campaign's leaves: a cell (one agent x task x model x hours x num_gpus x run), a
base model, and the checks of the names and budgets that become path components. Imports
nothing of the campaign package: the settings, the reader and the campaign build on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from decimal import Decimal, InvalidOperation
from typing import Any

from ptb_harness.core.errors import ConfigError
from ptb_harness.core.layout import NAME_PATTERN

_NAME_RE = re.compile(rf"^{NAME_PATTERN}$")


@dataclass(frozen=True, order=True)
class Cell:
    """One (agent, task, model, hours, num_gpus, run) combination of a campaign."""

    agent: str
    task: str
    model: str
    hours: str  # canonical decimal string, see format_hours
    num_gpus: int
    run: int

    @property
    def budget_seconds(self) -> float:
        return float(Decimal(self.hours) * 3600)

    @property
    def slug(self) -> str:
        """A single path component naming the cell (for scratch dirs and job names)."""
        return f"{self.agent}.{self.task}.{self.model}.{self.hours}h-{self.num_gpus}gpu-run{self.run}"

    @property
    def wildcards(self) -> dict[str, str]:
        return {
            "agent": self.agent,
            "task": self.task,
            "model": self.model,
            "hours": self.hours,
            "num_gpus": str(self.num_gpus),
            "run": str(self.run),
        }

    @classmethod
    def from_wildcards(cls, wildcards: Any) -> Cell:
        """Build a cell from Snakemake wildcards (or any mapping with the same keys)."""
        get = wildcards.get if hasattr(wildcards, "get") else lambda k: getattr(wildcards, k)
        return cls(
            agent=get("agent"),
            task=get("task"),
            model=get("model"),
            hours=get("hours"),
            num_gpus=int(get("num_gpus")),
            run=int(get("run")),
        )


#: a cell's coordinates, in order: the first columns of every table with a row per cell
CELL_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Cell))


@dataclass(frozen=True)
class TemplateFrom:
    """Where a model's chat template comes from instead of its own files (one of the two)."""

    path: str | None = None
    repo_id: str | None = None


@dataclass(frozen=True)
class Model:
    """A base model: a local directory (``path``) or a Hugging Face repo id (``repo_id``)."""

    name: str
    path: str | None = None
    repo_id: str | None = None
    #: the model entry's chat_template_from (None: the base model's own template)
    chat_template_from: TemplateFrom | None = None
    #: the model entry's chat_template_kwargs (template variables, over the task's)
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.path if self.path is not None else str(self.repo_id)


def format_hours(value: Any, key: str = "hours") -> str:
    """Canonical decimal text for a budget in hours: 10 -> '10', 0.50 -> '0.5'.

    Two spellings of one budget must map to one cell directory, and the text must not
    use exponents (1e-05) so that it matches HOURS_PATTERN.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"{key}: {value!r} is not a number of hours")
    try:
        dec = Decimal(str(value))
    except InvalidOperation:
        raise ConfigError(f"{key}: {value!r} is not a number of hours") from None
    if not dec.is_finite() or dec <= 0:
        raise ConfigError(f"{key}: budget must be a positive number of hours, got {value!r}")
    text = format(dec.normalize(), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def check_name(value: Any, key: str) -> str:
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value) or ".." in value:
        raise ConfigError(
            f"{key}: {value!r} is not a valid name (letters, digits, '_', '.', '+', '=', '-';"
            " no '/', '..' or whitespace; must not start with '.' or '-')"
        )
    return value
