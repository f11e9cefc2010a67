"""The judge's flag of a cell, as the results read it (judgement.json, see
``ptb_harness.stages.judge``).

A cell is flagged when its judgement's verdict is not `clean`: `flagged` (contamination,
disallowed_model, api_usage) or `judge_failed`. With the judge enabled, a cell without a
readable verdict is flagged too (`no_verdict`): the judge fails closed, and so do its
readers. A flag never changes a cell's outcome; it decides how the leaderboard counts it
(``leaderboard.missing``) and is listed, with its justification, in the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ptb_harness.core.cell_files import JUDGEMENT
from ptb_harness.core.records import read_json_dict
from ptb_harness.judging.verdict import CHECKS


@dataclass(frozen=True)
class Flag:
    #: flagged | judge_failed | no_verdict
    verdict: str
    #: what was flagged: check names, and judge_failed / no_verdict
    reasons: tuple[str, ...]
    #: one line per reason, with its justification
    justification: str

    @property
    def reason(self) -> str:
        return ", ".join(self.reasons)


def judgement_flag(judgement: dict | None, judge_enabled: bool) -> Flag | None:
    """The flag of a judgement record (None: clean, or not judged and no judge asked for)."""
    if judgement is None:
        if not judge_enabled:
            return None
        return Flag("no_verdict", ("no_verdict",), f"no readable {JUDGEMENT}: the judge has not run or failed")
    verdict = judgement.get("verdict")
    if verdict == "clean":
        return None
    if verdict not in ("flagged", "judge_failed"):
        return Flag("no_verdict", ("no_verdict",), f"{JUDGEMENT} has no valid verdict ({str(verdict)[:40]!r})")
    reasons = tuple(str(f) for f in judgement.get("flags") or ()) or (verdict,)
    lines = []
    for check in CHECKS:
        part = judgement.get(check)
        if isinstance(part, dict) and part.get("flagged"):
            lines.append(f"{check}: {str(part.get('justification', ''))[:600]}")
    if verdict == "judge_failed":
        error = (judgement.get("judge") or {}).get("error", "?")
        lines.append(f"judge_failed: {str(error)[:300]}")
    return Flag(verdict, reasons, " | ".join(lines))


def cell_flag(cell_dir: Path, judge_enabled: bool) -> Flag | None:
    """The flag of one cell dir (reads judgement.json only)."""
    path = Path(cell_dir) / JUDGEMENT
    return judgement_flag(read_json_dict(path), judge_enabled)
