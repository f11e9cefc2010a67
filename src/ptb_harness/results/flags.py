"""A cell's verdict as the results read it: its judgement.json (``ptb_harness.stages.judge``)
and, when a reviewer wrote one, its judgement_override.json, under the leaderboard's
rules (which verdicts count).

Each counted verdict is taken from the override when it names it (a human's decision wins
over every judge), else from the judgement: flagged when it is flagged or its judge failed
(fail closed). A counted verdict the judgement lacks (no judgement.json, or one written
before that judge existed) is missing: the cell is flagged `no_verdict`, and under
``leaderboard.missing_verdict: drop_entry`` its entry is left out too. An unreadable
judgement.json or override is a flag. A flag never changes a cell's outcome; it decides
how the leaderboard counts it (``leaderboard.missing``) and is listed, with its
justification, in the report. A counted PTB-lookup verdict does not flag the score: it
holds the entry unranked (``results.leaderboard.entry_holds``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptb_harness.core.cell_files import JUDGEMENT, JUDGEMENT_OVERRIDE, JudgementOverride
from ptb_harness.core.records import read_json_dict_present
from ptb_harness.judging.verdict import COUNTABLE_VERDICTS, PTB_LOOKUP

#: the verdicts an override may set (the general-anomaly one too: it is shown, never counted)
OVERRIDABLE = (*COUNTABLE_VERDICTS, "general_anomaly")


@dataclass(frozen=True)
class Flag:
    """A cell's verdict, where there is something to say: a flag of its score, a PTB
    lookup that holds its entry, verdicts it lacks, an override applied."""

    #: flagged | judge_failed | no_verdict ('' when the score is not flagged)
    verdict: str
    #: what flags the score: verdict names, judge_failed, no_verdict, override_invalid
    reasons: tuple[str, ...]
    #: one line per reason, with its justification
    justification: str
    #: a counted PTB-lookup verdict (or its judge failed): the entry is held unranked
    ptb_lookup: bool = False
    ptb_lookup_justification: str = ""
    #: counted verdicts the judgement lacks
    missing: tuple[str, ...] = ()
    #: the override applied: the verdicts it sets, who and why ('' when none)
    override: str = ""

    @property
    def reason(self) -> str:
        return ", ".join(self.reasons)

    @property
    def flagged(self) -> bool:
        return bool(self.reasons)


@dataclass(frozen=True)
class _Verdict:
    """One counted verdict of the cell: flagged, and how it stands: `ok`, `failed` (its
    judge gave none), `missing` (the judgement lacks it) or `broken` (the judgement is unreadable)."""

    flagged: bool = False
    status: str = "ok"
    justification: str = ""


def _broken(judgement: Mapping[str, Any] | None, present: bool) -> str:
    """Why the judgement cannot be read as one ('' when it can, or there is none)."""
    if judgement is None:
        return f"{JUDGEMENT} cannot be read" if present else ""
    verdict = judgement.get("verdict")
    if verdict not in ("clean", "flagged", "judge_failed"):
        return f"{JUDGEMENT} has no valid verdict ({str(verdict)[:40]!r})"
    return ""


def _verdict(judgement: Mapping[str, Any] | None, override: JudgementOverride | None, name: str) -> _Verdict:
    """The verdict `name`: the override's, else the judgement's (None: there is none)."""
    if override is not None and name in (override.verdicts or {}):
        value = bool((override.verdicts or {})[name])
        return _Verdict(value, justification=f"set by hand by {override.by}: {override.reason}"[:600])
    part = (judgement or {}).get(name)
    if not isinstance(part, Mapping) or not isinstance(part.get("flagged"), bool):
        return _Verdict(status="missing")
    # records before per-verdict failures: a failed judgement failed every verdict
    failed = part.get("judge_failed", (judgement or {}).get("verdict") == "judge_failed") is True
    return _Verdict(part["flagged"], "failed" if failed else "ok", str(part.get("justification", ""))[:600])


def _usable_override(override: JudgementOverride | None, present: bool) -> tuple[JudgementOverride | None, str]:
    """(the override to apply, '') or (None, why it cannot be applied: an invalid one is a flag)."""
    if not present:
        return None, ""
    problem = override.problem(OVERRIDABLE) if override else f"{JUDGEMENT_OVERRIDE}: not a readable JSON object"
    return (None, problem) if problem else (override, "")


def _override_text(override: JudgementOverride) -> str:
    sets = ", ".join(f"{k}={'true' if v else 'false'}" for k, v in (override.verdicts or {}).items())
    when = f" ({override.at})" if override.at else ""
    return f"{sets}; by {override.by}{when}: {override.reason}"


def _score_reasons(
    verdicts: Mapping[str, _Verdict], judgement: Mapping[str, Any] | None, broken: str
) -> list[tuple[str, str]]:
    """(reason, line) for everything that flags the score."""
    out = [(n, f"{n}: {v.justification}") for n, v in verdicts.items() if n != PTB_LOOKUP and v.flagged]
    if any(v.status == "failed" for n, v in verdicts.items() if n != PTB_LOOKUP):
        error = (judgement or {}).get("judge")
        error = error.get("error", "?") if isinstance(error, Mapping) else "?"
        out.append(("judge_failed", f"judge_failed: {str(error)[:300]}"))
    missing = [n for n, v in verdicts.items() if v.status == "missing"]
    if broken and any(v.status == "missing" for v in verdicts.values()):
        out.append(("no_verdict", f"no_verdict: {broken}"))
    elif missing and judgement is None:
        out.append(("no_verdict", f"no_verdict: no {JUDGEMENT}: the judge has not run on this cell"))
    elif missing:
        why = f"{JUDGEMENT} has no verdict for {', '.join(missing)} (judged by an older harness?)"
        out.append(("no_verdict", f"no_verdict: {why}"))
    return out


def judgement_flag(
    judgement: Mapping[str, Any] | None,
    judge_enabled: bool,
    *,
    counted: Sequence[str] = COUNTABLE_VERDICTS,
    judgement_present: bool | None = None,
    override: JudgementOverride | None = None,
    override_present: bool = False,
) -> Flag | None:
    """The cell's verdict (None: nothing to say: clean, or not judged and no judge asked
    for). `counted`: the verdicts that count (``leaderboard.judges``); `judgement_present`:
    whether judgement.json exists (None: whether it was read); `override_present`: whether
    a judgement_override.json exists (`override`: it, read)."""
    present = judgement is not None if judgement_present is None else judgement_present
    override, override_problem = _usable_override(override, override_present)
    if not present and not judge_enabled and override is None and not override_problem:
        return None
    broken = _broken(judgement, present)
    usable = None if broken else judgement
    verdicts = {name: _verdict(usable, override, name) for name in counted}
    if not present and not judge_enabled:  # not judged, and no judge asked for: nothing is missing
        verdicts = {n: v for n, v in verdicts.items() if v.status != "missing"}
    found = _score_reasons(verdicts, usable, broken)
    if override_problem:
        found.append(("override_invalid", f"override_invalid: {override_problem}"))
    ptb = verdicts.get(PTB_LOOKUP, _Verdict())
    looked = ptb.flagged or ptb.status == "failed"
    if not found and not looked and override is None:
        return None
    reasons = tuple(r for r, _ in found)
    verdict = "judge_failed" if "judge_failed" in reasons else "flagged" if reasons else ""
    if reasons and set(reasons) <= {"no_verdict", "override_invalid"}:
        verdict = "no_verdict"
    failed = "the PTB-lookup judge failed: " if ptb.status == "failed" and not ptb.flagged else ""
    return Flag(
        verdict,
        reasons,
        " | ".join(line for _, line in found),
        ptb_lookup=looked,
        ptb_lookup_justification=failed + ptb.justification if looked else "",
        # only a judgement that lacks them (none, or an older one): an unreadable one is a flag
        missing=() if broken else tuple(n for n, v in verdicts.items() if v.status == "missing"),
        override=_override_text(override) if override else "",
    )


def cell_flag(cell_dir: str | Path, judge_enabled: bool, counted: Sequence[str] = COUNTABLE_VERDICTS) -> Flag | None:
    """The verdict of one cell dir (reads judgement.json and judgement_override.json)."""
    # strings, not Paths, and one open for judgement.json: status calls this for every scored cell
    judgement, judgement_present = read_json_dict_present(os.path.join(cell_dir, JUDGEMENT))
    override_path = os.path.join(cell_dir, JUDGEMENT_OVERRIDE)
    override_present = os.path.lexists(override_path)
    return judgement_flag(
        judgement,
        judge_enabled,
        counted=counted,
        judgement_present=judgement_present,
        override=JudgementOverride.read(override_path) if override_present else None,
        override_present=override_present,
    )
