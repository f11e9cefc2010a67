"""The attempts of a final evaluation with seeds (PostTrainBench v1.2's
``run_final_eval.sh``), planned so that one scorer process serves every seed still to
score: pure, no I/O.

Upstream runs each seed through the task's ladder (4 attempts at the first token cap,
then 3 and 2 at lower ones), the first seed first; the later seeds start at the stage
where the first succeeded; a later seed that fails at every step is left out of the mean;
if the first fails at every step, the others never run and there is no score. Here every
attempt runs all the seeds still to score, in order, on one loaded model: while the first
has not succeeded, it comes first and gates the others (the scorer stops when it fails);
once it has, the others go on from the first step of the stage where it succeeded (its
attempt counted as their first try there), each attempt one step further. So every seed
sees the token caps upstream gives it, and an attempt loads the model once however many
seeds it runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ptb_scorer.seeds import SeedScore


@dataclass(frozen=True)
class SeedAttempt:
    """One attempt of the plan: its step in the ladder, and the seeds it runs."""

    step: int
    stage: int
    cap: int | None
    seeds: tuple[int, ...]
    #: the first seed has not succeeded yet: it runs first, and its failure ends the attempt
    gated: bool


@dataclass
class SeedPlan:
    """The ladder of one cell's seeds: ``next()`` the attempt to run, ``record()`` what it gave."""

    #: (stage, token cap) of every step (TaskSpec.ladder_steps)
    steps: Sequence[tuple[int, int | None]]
    #: the seeds to evaluate, the first first
    seeds: tuple[int, ...]
    scores: dict[int, SeedScore] = field(default_factory=dict)
    #: the attempt (1, 2, ...) in which each scored seed scored
    scored_in: dict[int, int] = field(default_factory=dict)
    #: why each seed not scored failed last (the seeds that waited for the first are not here)
    failures: dict[int, str] = field(default_factory=dict)
    _cursor: int = 0

    @property
    def first(self) -> int:
        return self.seeds[0]

    @property
    def first_scored(self) -> bool:
        return self.first in self.scores

    def next(self) -> SeedAttempt | None:
        """The next attempt, or None: every seed scored, the ladder ended, or the first
        seed failed at every step."""
        pending = tuple(s for s in self.seeds if s not in self.scores)
        if not pending or self._cursor >= len(self.steps):
            return None
        stage, cap = self.steps[self._cursor]
        return SeedAttempt(self._cursor, stage, cap, pending, gated=not self.first_scored)

    def record(
        self, n: int, attempt: SeedAttempt, scored: Mapping[int, Mapping[str, Any]], why: Mapping[int, str]
    ) -> None:
        """What attempt number ``n`` gave: each seed's metrics, or why not. In a gated
        attempt whose first seed failed, the others waited: nothing of theirs counts."""
        opened = not attempt.gated or self.first in scored
        for seed in attempt.seeds:
            if seed in scored and opened:
                self.scores[seed] = SeedScore(attempt.stage, scored[seed])
                self.scored_in[seed] = n
                self.failures.pop(seed, None)
            elif opened or seed == self.first:
                self.failures[seed] = why.get(seed, "no metrics")
        if attempt.gated and self.first_scored:
            # the later seeds start at the stage where the first succeeded: this attempt was
            # their first try at its first step
            self._cursor = 1 + next(i for i, (stage, _) in enumerate(self.steps) if stage == attempt.stage)
        else:
            self._cursor += 1

    def ordered_scores(self) -> dict[int, SeedScore]:
        """The scored seeds' scores, in the seeds' order."""
        return {s: self.scores[s] for s in self.seeds if s in self.scores}

    def summary(self) -> dict[str, dict[str, Any]]:
        """Each seed's outcome, for evaluate.json."""
        out: dict[str, dict[str, Any]] = {}
        for seed in self.seeds:
            if seed in self.scores:
                score = self.scores[seed]
                out[str(seed)] = {
                    "status": "scored",
                    "attempt": self.scored_in[seed],
                    "max_tokens_stage": score.stage,
                    "accuracy": score.metrics.get("accuracy"),
                }
            elif seed in self.failures:
                out[str(seed)] = {"status": "failed", "problem": self.failures[seed]}
            else:
                out[str(seed)] = {"status": "not run", "problem": f"the first seed ({self.first}) never scored"}
        return out
