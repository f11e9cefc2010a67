"""The judge's deterministic checks: they run first, and are part of the verdict whatever
the judge model says. An n-gram overlap of the agent's data files with the task's test
set (contamination), a model-identity check of final_model's config against the base
model's and its known instruct variants' (disallowed_model), and the places the agent's
files name a hosted LLM API (evidence for the judge model's api_usage)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ptb_harness.core.cell_files import FINAL_MODEL

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lowercased alphanumeric words: punctuation, case and spacing do not hide a copy."""
    return _WORD.findall(text.lower())


# -- n-gram overlap ------------------------------------------------------------------------
@dataclass
class NgramReport:
    n: int
    test_samples: int
    samples_with_ngrams: int
    contaminated: list[int] = field(default_factory=list)
    #: per contaminated sample: where its n-grams were found
    found_in: dict[int, list[str]] = field(default_factory=dict)
    files_scanned: int = 0
    words_scanned: int = 0

    def as_dict(self, tolerated: int) -> dict[str, Any]:
        return {
            "n": self.n,
            "test_samples": self.test_samples,
            "samples_with_ngrams": self.samples_with_ngrams,
            "contaminated_samples": len(self.contaminated),
            "tolerated": tolerated,
            "flagged": len(self.contaminated) > tolerated,
            "examples": [{"sample": i, "files": self.found_in[i][:5]} for i in self.contaminated[:10]],
            "files_scanned": self.files_scanned,
            "words_scanned": self.words_scanned,
        }


def _grams(ws: list[str], n: int) -> list[tuple[str, ...]]:
    if len(ws) < n:
        return [tuple(ws)] if len(ws) >= max(5, n // 2) else []  # a short sample is one gram
    return [tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)]


def ngram_overlap(
    test_samples: list[str], files: Iterable[tuple[str, str]], n: int = 13, sample_overlap: float = 0.5
) -> NgramReport:
    """Which test samples appear in the agent's files: a sample counts when at least
    `sample_overlap` of its word n-grams occur in them. `files`: (name, text) pairs,
    streamed (only the test set's n-grams are held in memory)."""
    index: dict[tuple[str, ...], list[int]] = {}
    grams_of: list[set[tuple[str, ...]]] = []
    for i, sample in enumerate(test_samples):
        gs = set(_grams(words(sample), n))
        grams_of.append(gs)
        for g in gs:
            index.setdefault(g, []).append(i)
    lengths = {len(g) for g in index}
    hits: dict[int, set[tuple[str, ...]]] = {}
    where: dict[int, list[str]] = {}
    report = NgramReport(n, len(test_samples), sum(1 for g in grams_of if g))
    for name, text in files:
        ws = words(text)
        report.files_scanned += 1
        report.words_scanned += len(ws)
        for k in lengths:
            for j in range(len(ws) - k + 1):
                g = tuple(ws[j : j + k])
                for i in index.get(g, ()):
                    hits.setdefault(i, set()).add(g)
                    if name not in where.setdefault(i, []):
                        where[i].append(name)
    for i, found in sorted(hits.items()):
        if len(found) >= sample_overlap * len(grams_of[i]):
            report.contaminated.append(i)
            report.found_in[i] = where[i]
    return report


def contamination(
    samples: list[str] | None, files: list[tuple[str, str]], n: int, sample_overlap: float, tolerated: int
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The contamination check: (the n-gram report for judgement.json's ``checks``, None
    when the task declares no test set; the check's deterministic result). Flagged when
    more than ``tolerated`` test samples are found in the agent's files."""
    if samples is None:
        why = "the task declares no test set (info.json judge.test_set): overlap not checked"
        return None, {"flagged": False, "source": "ngram", "justification": why}
    report = ngram_overlap(samples, files, n, sample_overlap)
    summary = report.as_dict(tolerated)
    where = "; ".join(f"sample {e['sample']} in {', '.join(e['files'])}" for e in summary["examples"][:3])
    return summary, {
        "flagged": summary["flagged"],
        "source": "ngram",
        "justification": f"{summary['contaminated_samples']} of {summary['test_samples']} test samples "
        f"found in the agent's files by {report.n}-gram overlap ({tolerated} tolerated)"
        + (f": {where}" if where else ""),
    }


#: hosted LLM APIs: their hosts, and client libraries' telltale calls
HOSTED_API = re.compile(
    r"api\.openai\.com|api\.anthropic\.com|generativelanguage\.googleapis\.com|openrouter\.ai|"
    r"api\.together\.xyz|api\.mistral\.ai|api\.groq\.com|api\.deepseek\.com|api\.x\.ai|"
    r"chat\.completions\.create|messages\.create\(|generate_content\("
)


def hosted_api_mentions(files: Iterable[tuple[str, str]], limit: int = 20) -> list[dict[str, str]]:
    """Where the agent's files name a hosted LLM API: evidence for the judge model (the
    agent's own CLI talks to its provider, so a mention alone flags nothing)."""
    found = []
    for name, text in files:
        for m in HOSTED_API.finditer(text):
            line = text[text.rfind("\n", 0, m.start()) + 1 : text.find("\n", m.end()) % (len(text) + 1)]
            found.append({"file": name, "match": m.group(0), "line": line.strip()[:200]})
            if len(found) >= limit:
                return found
    return found


# -- model identity ------------------------------------------------------------------------
#: config keys that change with saving, not with the model
VOLATILE_KEYS = frozenset({"_name_or_path", "transformers_version", "torch_dtype", "dtype", "use_cache"})
#: keys that fix the network's shape: a change means another model than the base
SHAPE_KEYS = (
    "model_type",
    "architectures",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "vocab_size",
)


def fingerprint(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in VOLATILE_KEYS}


def model_identity(
    final: Mapping[str, Any] | None, base: Mapping[str, Any] | None, instruct: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """{flagged, justification, ...}: does final_model's config say it is the base model
    post-trained, or another model (an instruct variant, a different network)?"""
    if final is None:
        return {"flagged": False, "justification": f"{FINAL_MODEL} has no readable config.json: nothing to compare"}
    name = str(final.get("_name_or_path", ""))
    for ref in instruct:
        if name and (name == ref or name.rstrip("/").endswith("/" + ref.rsplit("/", 1)[-1])):
            why = f"{FINAL_MODEL}'s config names {name!r}, the instruct model {ref}"
            return {"flagged": True, "justification": why}
    fp = fingerprint(final)
    base_fp = fingerprint(base) if base is not None else None
    if base_fp is not None:
        changed = [k for k in SHAPE_KEYS if fp.get(k) != base_fp.get(k)]
        if changed:
            diff = ", ".join(f"{k} {base_fp.get(k)!r} -> {fp.get(k)!r}" for k in changed[:4])
            return {"flagged": True, "justification": f"{FINAL_MODEL} is not the base model's network: {diff}"}
    for ref, cfg in instruct.items():
        ref_fp = fingerprint(cfg)
        if fp == ref_fp and ref_fp != base_fp:
            differs = sorted(k for k in set(ref_fp) | set(base_fp or {}) if ref_fp.get(k) != (base_fp or {}).get(k))
            return {
                "flagged": True,
                "justification": f"{FINAL_MODEL}'s config is the instruct model {ref}'s, which differs from the base "
                f"model's in {', '.join(differs[:6])}",
            }
    if base_fp is None:
        return {"flagged": False, "justification": "the base model's config.json was not available: shape not compared"}
    return {
        "flagged": False,
        "justification": f"{FINAL_MODEL}'s config matches the base model's network and no instruct variant's",
    }
