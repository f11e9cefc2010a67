"""The deterministic signals from what the harness recorded of the agent (pure: the
records come in as values).

- ``ngram_overlap`` from ``evidence.json`` (the evidence recorder's reading of every file
  the agent wrote, deleted ones included): flagged when more test samples than tolerated
  occur in the agent's files; failed (judge_failed) when the record is missing,
  unreadable, or says it could not read everything.
- ``ptb_lookup`` and ``hosted_api`` from the agent's tool calls in its trace and its
  gateway's log (``judging.lookups``): flagged on a call naming PostTrainBench's places,
  or a hosted LLM API's host; failed when the trace or the log could not be read whole.
  The files' mentions (a README naming the repository, code naming a host or an SDK
  call) are findings for the judges, never a flag on their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ptb_harness.core.cell_files import EVIDENCE
from ptb_harness.judging.lookups import Hit, ToolCall, hosted_hits, ptb_hits
from ptb_harness.judging.signals import Finding, Signal, failed

#: the most hits of each kind kept as findings (their count is whole)
MAX_HITS = 50
#: how much of the gateway's tool calls goes to the judges' prompt
REQUESTS_TEXT_MAX = 200_000


@dataclass
class Actions:
    """What the agent did, as its trace and its gateway's log record it: the hits of both
    lookups, counted, and why a record could not be read."""

    ptb: list[Hit] = field(default_factory=list)
    hosted: list[Hit] = field(default_factory=list)
    ptb_count: int = 0
    hosted_count: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    log_sha256: str | None = None
    #: the gateway's tool calls, as text for the prompt (bounded)
    requests: list[str] = field(default_factory=list)
    _requests_chars: int = 0

    def add(self, calls: Iterable[ToolCall], source: str) -> None:
        calls = list(calls)
        self.calls[source] = self.calls.get(source, 0) + len(calls)
        self.add_hits(ptb_hits(calls, source), hosted_hits(calls, source))
        if source == "llm_log":
            for call in calls:
                line = f"{call.where}: {call.name}: {call.text[:2000]}"
                if self._requests_chars + len(line) <= REQUESTS_TEXT_MAX:
                    self.requests.append(line)
                    self._requests_chars += len(line) + 1

    def add_hits(self, ptb: list[Hit], hosted: list[Hit]) -> None:
        self.ptb_count += len(ptb)
        self.hosted_count += len(hosted)
        self.ptb += ptb[: max(MAX_HITS - len(self.ptb), 0)]
        self.hosted += hosted[: max(MAX_HITS - len(self.hosted), 0)]

    def requests_text(self) -> str:
        return "\n".join(self.requests)


def _finding(hit: Hit) -> Finding:
    return Finding(hit.source, hit.where, hit.what, hit.excerpt)


def _mentions(recorded: Mapping[str, Any] | None, kinds: tuple[str, ...]) -> list[Finding]:
    mentions = recorded.get("mentions") if isinstance(recorded, Mapping) else None
    out = []
    for m in mentions if isinstance(mentions, list) else []:
        if isinstance(m, Mapping) and m.get("what") in kinds:
            what = f"{m.get('match', '')} named in a file (evidence, not a call)"
            out.append(Finding("file", str(m.get("path", "")), what, str(m.get("excerpt", "")), bool(m.get("gone"))))
    return out[:MAX_HITS]


def lookup_signals(actions: Actions, recorded: Mapping[str, Any] | None) -> list[Signal]:
    """The hosted_api and ptb_lookup signals."""
    calls = ", ".join(f"{n} tool calls in the {src}" for src, n in sorted(actions.calls.items())) or "no tool calls"
    out = []
    for name, hits, count, what, kinds in (
        (
            "hosted_api",
            actions.hosted,
            actions.hosted_count,
            "call a hosted LLM API's host",
            ("hosted_api", "sdk_call"),
        ),
        ("ptb_lookup", actions.ptb, actions.ptb_count, "name PostTrainBench's places", ("ptb",)),
    ):
        summary = f"{count} of the agent's tool calls {what} ({calls})"
        if hits:
            summary += f"; the first: {hits[0].what} ({hits[0].where})"
        if actions.failures:
            summary += "; not read in full: " + "; ".join(actions.failures)
        findings = tuple(_finding(h) for h in hits) + tuple(_mentions(recorded, kinds))
        details = {"calls": count, "file_mentions": len(findings) - len(hits), **actions.calls}
        out.append(Signal(name, bool(count), bool(actions.failures), summary, findings, details))
    return out


# -- the n-gram check ---------------------------------------------------------------------


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def ngram_signal(recorded: Mapping[str, Any] | None, tolerated: int) -> Signal:
    """The n-gram check of every file the agent wrote, from evidence.json."""
    if not isinstance(recorded, Mapping):
        why = (
            f"{EVIDENCE} is missing or unreadable: the files the agent wrote were not recorded "
            "(solved without the judge or by an older harness: solve it again; or the recorder failed)"
        )
        return failed("ngram_overlap", why)
    test = recorded.get("test_set") if isinstance(recorded.get("test_set"), Mapping) else {}
    result = recorded.get("contamination") if isinstance(recorded.get("contamination"), Mapping) else {}
    incomplete = recorded.get("incomplete") if isinstance(recorded.get("incomplete"), list) else ["malformed"]
    complete = recorded.get("complete") is True and not incomplete
    if test.get("samples") is None and not test.get("error") and complete:
        return Signal("ngram_overlap", False, summary="the task declares no test set: overlap not checked")
    found, samples = _int(result.get("found_count")), _int(test.get("samples"))
    if found is None or samples is None:
        return failed("ngram_overlap", f"{EVIDENCE} has no n-gram result: " + "; ".join(map(str, incomplete))[:1000])
    summary = _summary(recorded, found, samples, tolerated)
    if not complete:
        summary += "; the evidence is incomplete: " + "; ".join(map(str, incomplete))[:1500]
    return Signal(
        "ngram_overlap",
        flagged=found > tolerated,
        failed=not complete,
        summary=summary,
        findings=_file_findings(recorded),
        details=_details(recorded, found, samples, tolerated),
    )


def _summary(recorded: Mapping[str, Any], found: int, samples: int, tolerated: int) -> str:
    findings = [f for f in recorded.get("findings") or [] if isinstance(f, Mapping)]
    counted = [f for f in findings if f.get("counted")]
    gone = sum(1 for f in counted if f.get("gone"))
    examples = recorded["contamination"].get("examples") or []
    where = "; ".join(
        f"sample {e.get('sample')} in {', '.join(map(str, e.get('files') or []))}"
        for e in examples[:3]
        if isinstance(e, Mapping)
    )
    text = (
        f"{found} of {samples} test samples found in the files the agent wrote ({tolerated} tolerated)"
        + (f": {where}" if where else "")
        + (f"; {gone} of the {len(counted)} files holding test samples were deleted before the end" if gone else "")
    )
    in_places = _int(recorded["contamination"].get("in_test_set_places")) or 0
    if in_places:
        text += f"; {in_places} samples also in the test set's own places (its dataset cache, the scorer's logs)"
    lost = recorded.get("lost") if isinstance(recorded.get("lost"), Mapping) else {}
    if _int(lost.get("count")):
        text += f"; {lost['count']} files were deleted before the recorder could open them"
    counts = recorded.get("counts") if isinstance(recorded.get("counts"), Mapping) else {}
    if _int(counts.get("unwatched_dirs")):
        text += (
            f"; {counts['unwatched_dirs']} directories past the inotify watch limit were read by walks only"
            " (a file living there shorter than a walk's interval can be missed)"
        )
    return text


def _file_findings(recorded: Mapping[str, Any]) -> tuple[Finding, ...]:
    out = []
    for f in recorded.get("findings") or []:
        if not isinstance(f, Mapping):
            continue
        place = f" ({f.get('place')}, {'counted' if f.get('counted') else 'not counted'})" if f.get("place") else ""
        what = f"{f.get('samples', 0)} test samples, {f.get('grams', 0)} test n-grams ({f.get('kind', '?')}){place}"
        out.append(Finding("file", str(f.get("path", "")), what, str(f.get("excerpt", "")), bool(f.get("gone"))))
    return tuple(out)


def _details(recorded: Mapping[str, Any], found: int, samples: int, tolerated: int) -> dict[str, Any]:
    counts = recorded.get("counts") if isinstance(recorded.get("counts"), Mapping) else {}
    lost = recorded.get("lost") if isinstance(recorded.get("lost"), Mapping) else {}
    return {
        "contaminated_samples": found,
        "test_samples": samples,
        "tolerated": tolerated,
        "files_with_test_samples": _int(recorded.get("files_with_test_samples")) or 0,
        "file_versions_read": _int(counts.get("versions")) or 0,
        "bytes_read": _int(counts.get("bytes_read")) or 0,
        "files_lost": _int(lost.get("count")) or 0,
        "complete": recorded.get("complete") is True,
    }
