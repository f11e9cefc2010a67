"""The leaderboard's rules: which tasks the weighted average is over, their weights, what
a cell without a usable score counts as, and which of the judges' verdicts count.

A preset (``leaderboard.rules``) gives every one of them: ``ptb-v1.2`` (the default:
PostTrainBench's current rules), ``ptb-v1.0`` (its first release) or ``custom`` (the
harness's own defaults: every task, equal weights, nothing substituted). A key the
campaign sets replaces the preset's value, and the tables name every such change, so a
score is PostTrainBench's unless a setting says otherwise and says so.

The facts behind the presets (shared notes, upstream v1.2 rules, sections 4 and 5):

- v1.2 averages six tasks (bfcl is gone) with published factors
  (``data/factors-v1.2.json``: 1/(instruct - base) over the four model pairs, normalised);
  a cell without a score, or flagged by the contamination (incl. the model-identity
  check) or the API-usage judge, counts as the base model's score; a PTB-lookup flag
  stops aggregation for a human (here: the entry is not ranked, and collect names it);
  a scored run without a required verdict drops its whole entry.
- v1.0 averaged seven tasks (with bfcl), weighted by the inverse gap between the
  instruct and base models' scores; a flag of the contamination judge (contamination or
  disallowed model) or a missing verdict counts as the base model's score.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from ptb_harness.campaign.settings import LeaderboardSettings
from ptb_harness.judging.verdict import COUNTABLE_VERDICTS

#: what a scored cell without a required verdict does: it counts as flagged, or its whole
#: entry is left out of the leaderboard (PostTrainBench v1.2)
MISSING_VERDICT = ("flagged", "drop_entry")
WEIGHTINGS = ("equal", "explicit", "inverse_gap")
MISSING = ("empty", "base_model")

#: PostTrainBench v1.2's published factors (data/factors-v1.2.json)
FACTORS_V1_2 = {
    "aime2025": 0.24480,
    "gpqamain": 0.24273,
    "healthbench": 0.19899,
    "humaneval": 0.11471,
    "gsm8k": 0.10113,
    "arenahardwriting": 0.09764,
}
#: PostTrainBench v1.0's benchmarks (scripts/utils.py HARDCODED_BENCHMARKS)
TASKS_V1_0 = ("aime2025", "arenahardwriting", "bfcl", "gpqamain", "gsm8k", "healthbench", "humaneval")


PRESETS: Mapping[str, LeaderboardSettings] = {
    "ptb-v1.2": LeaderboardSettings(
        rules="ptb-v1.2",
        weighting="explicit",
        weights=FACTORS_V1_2,
        missing="base_model",
        average_tasks=tuple(FACTORS_V1_2),
        judges=COUNTABLE_VERDICTS,
        missing_verdict="drop_entry",
    ),
    "ptb-v1.0": LeaderboardSettings(
        rules="ptb-v1.0",
        weighting="inverse_gap",
        missing="base_model",
        average_tasks=TASKS_V1_0,
        judges=("contamination", "disallowed_model"),
        missing_verdict="flagged",
    ),
    "custom": LeaderboardSettings(),
}
PRESET_TITLES = {
    "ptb-v1.2": "PostTrainBench v1.2",
    "ptb-v1.0": "PostTrainBench v1.0",
    "custom": "the campaign's own",
}
#: the keys a campaign may change (null in the config: the preset's value)
CHANGEABLE = ("weighting", "weights", "missing", "average_tasks", "judges", "missing_verdict")


def describe_rules(board: LeaderboardSettings) -> str:
    """One line for the tables: the preset and what the campaign changed."""
    shown = ", ".join(f"{k}: {v}" for k, v in board.changed.items())
    changed = f"; changed by the campaign: {shown}" if board.changed else ""
    return f"Rules: {board.rules} ({PRESET_TITLES[board.rules]}){changed}."


def rules_settings(rules: str = "ptb-v1.2", **given: Any) -> LeaderboardSettings:
    """The preset `rules` with the given keys (None: the preset's) replacing its values;
    the ones that differ from the preset's are named in ``changed``."""
    preset = PRESETS[rules]
    known = {f.name for f in fields(LeaderboardSettings)} - {"rules", "changed"}
    unknown = set(given) - known
    if unknown:
        raise TypeError(f"unknown leaderboard keys: {', '.join(sorted(unknown))}")
    values = {k: _typed(k, v) for k, v in given.items() if v is not None}
    if values.get("weights") and "average_tasks" not in values:
        values["average_tasks"] = tuple(values["weights"])  # explicit weights name the average's tasks
    changed = {k: _shown(v) for k, v in values.items() if k in CHANGEABLE and _typed(k, getattr(preset, k)) != v}
    return replace(preset, **values, changed=changed)


def _typed(key: str, value: Any) -> Any:
    if value is None:
        return None
    if key in ("average_tasks", "judges"):
        return tuple(value)
    if key == "weights":
        return {str(t): float(w) for t, w in value.items()}
    return value


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k} {v:g}" for k, v in value.items()) + "}"
    return str(value)
