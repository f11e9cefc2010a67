"""The harness a campaign runs, frozen: a content-addressed copy of its code.

Seed item 5: replacing the harness's own files while cells ran killed two 10-hour jobs.
`ptb-harness run` copies the harness (Snakefile, rules, scripts, the ptb_harness package,
the config schema) to `<workdir>/.ptb-harness/<digest>/` and starts Snakemake from that
copy, with the copy's package first on PYTHONPATH. Every job of the run, on any node,
reads the copy; editing or replacing files of the checkout changes nothing until the
next `run`. Each cell records the digest (and the checkout's git commit) it ran with.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

#: What makes up the harness, relative to its root.
HARNESS_PATHS = ("Snakefile", "workflow", "src/ptb_harness", "src/ptb_scorer", "config/config.schema.yaml")
SNAPSHOT_DIR = ".ptb-harness"
#: Set by `ptb-harness run` for the jobs: the checkout's git state at launch.
GIT_ENV = "PTB_HARNESS_GIT"


def harness_root() -> Path:
    """The root of the harness this code runs from (a checkout or a snapshot)."""
    return Path(__file__).resolve().parents[3]


def _files(root: Path) -> list[Path]:
    out = []
    for rel in HARNESS_PATHS:
        p = root / rel
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out += [f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc"]
    return sorted(out)


def harness_digest(root: Path | None = None) -> str:
    """sha256 over the harness's files (paths and contents)."""
    root = root or harness_root()
    h = hashlib.sha256()
    for f in _files(root):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()


def git_state(root: Path | None = None) -> str | None:
    """'<commit>' or '<commit>+dirty' of the checkout, None outside git."""
    if os.environ.get(GIT_ENV):
        return os.environ[GIT_ENV]
    root = root or harness_root()
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        if not commit:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", *HARNESS_PATHS],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return commit + ("+dirty" if dirty else "")


def make_snapshot(workdir: Path, root: Path | None = None) -> Path:
    """The snapshot of the harness under workdir (made once per distinct content)."""
    root = root or harness_root()
    digest = harness_digest(root)
    dest = Path(workdir).resolve() / SNAPSHOT_DIR / digest[:16]
    if dest.is_dir():
        return dest
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    for f in _files(root):
        target = tmp / f.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    try:
        os.rename(tmp, dest)
    except OSError:  # another run made the same snapshot meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


@functools.lru_cache(maxsize=1)
def _provenance() -> tuple[tuple[str, str | None], ...]:
    root = harness_root()
    snap = root.parent.name == SNAPSHOT_DIR
    return (("digest", harness_digest(root)), ("git", git_state(root)), ("snapshot", str(root) if snap else None))


def provenance() -> dict[str, str | None]:
    """The harness's digest, git state and snapshot dir; computed once per process (it
    hashes the harness's files and asks git twice)."""
    return dict(_provenance())
