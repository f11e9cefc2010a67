"""A judge's runs and the verdict they give, per field, as PostTrainBench v1.2 resolves them
(``scripts/utils.py`` ``resolve_judgement``: the contamination judge is run three times).

Each run of a judge is `ok` (a verdict for every field of the judge), `failed` (no answer:
the endpoint's error, a timeout, the request budget spent) or `malformed` (an answer that
is not such a verdict). Then, per field:

- every run is `ok`: the field is flagged when at least `quorum` runs flag it (upstream:
  the per-field majority, 2 of 3);
- some run is not: the first run's verdict alone, when it is `ok` (upstream: a missing
  slot leaves the single verdict of slot 1, the inline run, in force; the other runs'
  answers are recorded, not counted);
- the first run is not `ok` either: no verdict, which the judgement records as
  `judge_failed` (flagged: fail closed; upstream then has no verdict at all, which drops
  the run's whole entry from aggregation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

STATUSES = ("ok", "failed", "malformed")


@dataclass(frozen=True)
class Answer:
    """One field's answer in one run."""

    flagged: bool
    justification: str


@dataclass(frozen=True)
class Run:
    """One run of a judge: its answers (when `ok`), or why it gave none."""

    #: 1, 2, ...: run 1 is the one that stands alone when another is missing
    n: int
    status: str
    answers: Mapping[str, Answer] = field(default_factory=dict)
    error: str = ""
    #: the model's raw answer, cut (kept to audit a malformed one)
    raw: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run": self.n, "status": self.status}
        if self.answers:
            out["answers"] = {n: asdict(a) for n, a in self.answers.items()}
        if self.error:
            out["error"] = self.error
        if self.raw and self.status == "malformed":
            out["raw"] = self.raw[:2000]
        return out


@dataclass(frozen=True)
class FieldVote:
    """A field's verdict from a judge's runs."""

    field: str
    #: None: no verdict (judge_failed)
    flagged: bool | None
    #: how it was decided, e.g. "2 of 3 runs flag it (quorum 2)", "run 1 alone (run 2 failed: ...)"
    resolved_by: str
    justification: str
    #: runs that flag it, and runs counted
    votes: int = 0
    counted: int = 0


def resolve(runs: Sequence[Run], fields: Sequence[str], quorum: int) -> dict[str, FieldVote]:
    """Each field's verdict from the runs (see the module's rules)."""
    if not runs:
        return {f: FieldVote(f, None, "no verdict: the judge did not run", "") for f in fields}
    if all(r.status == "ok" for r in runs):
        return {f: _majority(runs, f, quorum) for f in fields}
    first, others = runs[0], [r for r in runs if r.status != "ok"]
    missing = "; ".join(f"run {r.n} {r.status}: {r.error[:200]}" for r in others)
    if first.status == "ok":
        why = f"run 1 alone, as upstream when a run is missing ({missing})"
        return {f: FieldVote(f, first.answers[f].flagged, why, first.answers[f].justification, 1, 1) for f in fields}
    return {f: FieldVote(f, None, f"no verdict: {missing}", "") for f in fields}


def _majority(runs: Sequence[Run], field: str, quorum: int) -> FieldVote:
    flagging = [r for r in runs if r.answers[field].flagged]
    flagged = len(flagging) >= quorum
    why = f"{len(flagging)} of {len(runs)} runs flag it (quorum {quorum})"
    # the justification of the side that decided: the flagging runs', or the first clean one's
    side = flagging if flagged else [r for r in runs if not r.answers[field].flagged][:1]
    text = " | ".join(f"[run {r.n}] {r.answers[field].justification}" for r in side)
    return FieldVote(field, flagged, why, text, len(flagging), len(runs))
