"""The contamination check: which of the task's test samples a file holds, by word
n-gram overlap (``ngrams``) of every text the file holds (``decode``).

The harness's judge runs it on every file the agent wrote during its solve; the agent
gets the same check as ``contamination_check.py`` in its task dir, with ``test_set.json``
naming the test data it checks against (where the samples come from, how many, their
sha256 and the check's parameters), so it can screen its own data first:

    python contamination_check.py data/train.jsonl more_data/

Exit status: 0 when no more test samples than tolerated are found, 1 when more are, 2
when the check could not run (the test set not loadable, an input unreadable).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptb_scorer.decode import Budget, decode
from ptb_scorer.ngrams import NgramIndex, Scanner, ScanResult

#: the name of the test-set identity file in the agent's task dir
TEST_SET_FILE = "test_set.json"
CHECKER_FILE = "contamination_check.py"
#: what one file may decode to, by default (the harness sets its own)
DEFAULT_FILE_BYTES = 8 << 30


class UnreadableTestSet(Exception):
    """The test set could not be read (the check cannot run)."""


# -- the test set --------------------------------------------------------------------------


def field_text(value: Any) -> str:
    """A field's text: a string as it is, any other value's strings (keys included) in order."""
    if isinstance(value, str):
        return value
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(reversed([x for kv in v.items() for x in kv]))
        elif isinstance(v, list | tuple):
            stack.extend(reversed(v))
        elif v is not None:
            out.append(str(v))
    return " ".join(out)


def _json_records(text: str) -> list:
    """A JSON list, or JSON lines (whatever the file's suffix: BFCL's .json files are lines)."""
    try:
        data = json.loads(text)
    except ValueError:
        return [json.loads(ln) for ln in text.splitlines() if ln.strip()]
    return data if isinstance(data, list) else [data]


def _rows_from_file(path: Path) -> list:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UnreadableTestSet(f"test set {path}: {e.strerror}") from None
    try:
        return _json_records(text)
    except ValueError as e:
        raise UnreadableTestSet(f"test set {path}: not valid JSON ({e})") from None


def _rows_from_hub(spec: dict, hf_home: str | None) -> list:
    try:
        import datasets  # offline, from the site's cache
    except ImportError:
        raise UnreadableTestSet("test set: the `datasets` package is not installed") from None
    cache_dir = str(Path(hf_home) / "datasets") if hf_home else None
    try:
        ds = datasets.load_dataset(
            spec["hf_dataset"],
            spec.get("config"),
            data_dir=spec.get("data_dir"),
            split=spec.get("split", "test"),
            cache_dir=cache_dir,
        )
        return list(ds)
    except Exception as e:  # any loader failure is the same to the check
        raise UnreadableTestSet(f"test set {spec['hf_dataset']}: cannot load ({type(e).__name__}: {e})") from None


def load_test_samples(spec: Any, task_dir: Path, hf_home: str | None) -> list[str] | None:
    """The task's test samples as text (info.json ``judge.test_set``), or None when the
    task declares none: ``{"path": "file.jsonl" (in the task dir) | "path_in_hf_home":
    "ptb_files/..." | "hf_dataset": id, "config", "data_dir", "split"; "fields": [...]}``."""
    if spec is None:
        return None
    if not isinstance(spec, dict) or not isinstance(spec.get("fields"), list) or not spec["fields"]:
        why = "needs `fields` and `path`, `path_in_hf_home` or `hf_dataset`"
        raise UnreadableTestSet(f"info.json judge.test_set: {why}")
    fields = [str(f) for f in spec["fields"]]
    if "path" in spec:
        rows = _rows_from_file(task_dir / str(spec["path"]))
    elif "path_in_hf_home" in spec:
        if not hf_home:
            raise UnreadableTestSet(f"test set {spec['path_in_hf_home']}: no HF home is set (site.hf_home, HF_HOME)")
        rows = _rows_from_file(Path(hf_home) / str(spec["path_in_hf_home"]))
    elif "hf_dataset" in spec:
        rows = _rows_from_hub(spec, hf_home)
    else:
        raise UnreadableTestSet("info.json judge.test_set: needs `path`, `path_in_hf_home` or `hf_dataset`")
    return [" ".join(field_text(r.get(f, "")) for f in fields) for r in rows if isinstance(r, dict)]


def samples_sha256(samples: list[str]) -> str:
    """The identity of a test set's samples (what the judge and the agent's check compare)."""
    return hashlib.sha256("\x1e".join(samples).encode()).hexdigest()


# -- one file ------------------------------------------------------------------------------


@dataclass
class FileScan:
    """What one file holds: the scan's result and how it was read."""

    result: ScanResult
    budget: Budget

    @property
    def complete(self) -> bool:
        return not self.budget.cut


def scan_stream(stream: Any, name: str, index: NgramIndex, max_bytes: int = DEFAULT_FILE_BYTES) -> FileScan:
    """Decode a binary stream and scan all its text."""
    budget = Budget(max_bytes)
    scanner = Scanner(index)
    scanner.feed(decode(stream, name, budget))
    return FileScan(scanner.finish(), budget)


def scan_path(path: Path, index: NgramIndex, max_bytes: int = DEFAULT_FILE_BYTES) -> FileScan:
    """A regular file, opened without following a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        return scan_stream(f, str(path), index, max_bytes)


# -- the agent's command -------------------------------------------------------------------


def _inputs(paths: list[str]) -> Iterator[Path]:
    for p in map(Path, paths):
        if p.is_dir() and not p.is_symlink():
            for dirpath, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    yield Path(dirpath) / f
        else:
            yield p


def _identity(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UnreadableTestSet(f"{path}: cannot read the test set's identity ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("spec"), dict):
        raise UnreadableTestSet(f"{path}: not a test set identity (no `spec`)")
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Which of the task's test samples your files hold (n-gram overlap).")
    ap.add_argument("inputs", nargs="+", help="files or directories to check (every file inside, any format)")
    here = Path(sys.argv[0]).resolve().parent
    ap.add_argument("--test-set", default=str(here / TEST_SET_FILE), help="the test set's identity (test_set.json)")
    args = ap.parse_args(argv)
    try:
        ident = _identity(Path(args.test_set))
        samples = load_test_samples(ident["spec"], Path(args.test_set).parent, os.environ.get("HF_HOME"))
    except UnreadableTestSet as e:
        print(f"contamination_check: {e}", file=sys.stderr)
        return 2
    samples = samples or []
    if ident.get("sha256") and samples_sha256(samples) != ident["sha256"]:
        print("contamination_check: warning: the test samples loaded here differ from the judge's", file=sys.stderr)
    n, overlap, tolerated = int(ident.get("n", 13)), float(ident.get("sample_overlap", 0.5)), ident.get("tolerated", 3)
    index = NgramIndex(samples, n)
    hits: dict[int, set[int]] = {}
    failed = 0
    for path in _inputs(args.inputs):
        try:
            scan = scan_path(path, index)
        except OSError as e:
            print(f"{path}: not read ({e})")
            failed += 1
            continue
        for sample, grams in scan.result.hits.items():
            hits.setdefault(sample, set()).update(grams)
        found = scan.result.found(index, overlap)
        note = f" (not read in full: {'; '.join(scan.budget.cut)})" if scan.budget.cut else ""
        print(f"{path}: {len(found)} test samples ({scan.budget.kind}){note}")
        failed += bool(scan.budget.cut)
    total = sorted(i for i, gs in hits.items() if len(gs) >= overlap * index.grams_of[i])
    print(f"{len(total)} of {len(samples)} test samples found in all ({tolerated} tolerated); samples: {total[:20]}")
    if failed:
        return 2
    return 1 if len(total) > int(tolerated) else 0


if __name__ == "__main__":
    sys.exit(main())
