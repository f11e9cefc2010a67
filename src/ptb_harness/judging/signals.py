"""The deterministic checks' results, one shape for all of them: what the judges and the
leaderboard consume (judgement.json ``signals``).

A ``Signal`` is a fact about the cell, decided by code from what the harness recorded:
``flagged`` flags its verdict field (``FIELD_OF``) whatever a judge model says; ``failed``
means its evidence could not be read in full (a record missing, over its bound, cut),
and then the verdict is ``judge_failed``, never "nothing found". ``findings`` say where
(agent-controlled text: data to show escaped, never instructions), ``details`` hold the
check's numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ptb_harness.core.cell_files import FINAL_MODEL

#: the deterministic checks, and the verdict field each one flags
FIELD_OF: Mapping[str, str] = {
    "ngram_overlap": "contamination",
    "model_identity": "disallowed_model",
    "hosted_api": "api_usage",
    "ptb_lookup": "ptb_lookup",
}
SIGNALS = tuple(FIELD_OF)
#: where a finding was seen: a file the agent wrote (in the job dir), the trace, the
#: LLM gateway's request log, final_model's config
SOURCES = ("file", "trace", "llm_log", FINAL_MODEL)


@dataclass(frozen=True)
class Finding:
    """One piece of evidence: where it was seen and what matched there."""

    source: str
    #: a path in the job dir ("home/agent/x.jsonl"), a trace line, "request 12"
    where: str
    #: what matched: "sample 3", a pattern's name, a config key
    what: str
    #: the text around it, sanitized and cut (agent text)
    excerpt: str = ""
    #: the file was deleted or moved away before the end of the solve
    gone: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v or k in ("source", "where", "what")}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            source=str(data.get("source", "")),
            where=str(data.get("where", "")),
            what=str(data.get("what", "")),
            excerpt=str(data.get("excerpt", "")),
            gone=bool(data.get("gone", False)),
        )


@dataclass(frozen=True)
class Signal:
    """One deterministic check's result."""

    name: str
    flagged: bool
    #: its evidence was not read in full: the judgement fails closed (judge_failed)
    failed: bool = False
    #: one line: what it found, or why it failed
    summary: str = ""
    findings: tuple[Finding, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def field(self) -> str:
        """The verdict field this signal flags."""
        return FIELD_OF[self.name]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "field": self.field,
            "flagged": self.flagged,
            "failed": self.failed,
            "summary": self.summary,
            "findings": [f.to_dict() for f in self.findings],
            "details": dict(self.details),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Signal:
        """A signal as judgement.json has it (a malformed one reads as failed)."""
        name = str(data.get("name", ""))
        ok = name in FIELD_OF and isinstance(data.get("flagged"), bool) and isinstance(data.get("failed"), bool)
        findings = data.get("findings") if isinstance(data.get("findings"), list) else []
        return cls(
            name=name if name in FIELD_OF else "ngram_overlap",
            flagged=bool(data.get("flagged")) if ok else True,
            failed=bool(data.get("failed")) if ok else True,
            summary=str(data.get("summary", "")) if ok else f"a malformed signal record: {str(data)[:200]}",
            findings=tuple(Finding.from_dict(f) for f in findings if isinstance(f, Mapping)),
            details=data.get("details") if isinstance(data.get("details"), Mapping) else {},
        )


def failed(name: str, why: str) -> Signal:
    """The signal of a check whose evidence could not be read."""
    return Signal(name, flagged=False, failed=True, summary=why)
