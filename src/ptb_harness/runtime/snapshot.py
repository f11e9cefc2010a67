"""The harness a campaign runs, frozen: a content-addressed copy of its code.

Seed item 5: replacing the harness's own files while cells ran killed two 10-hour jobs.
`ptb-harness run` copies the harness (Snakefile, rules, scripts, the ptb_harness package,
the config schema, and the campaign's agents/ and tasks/: the scorer that runs is part of
what is frozen) to `<workdir>/.ptb-harness/<digest>/` and starts Snakemake from that
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
CODE_PATHS = ("Snakefile", "workflow", "src/ptb_harness", "src/ptb_scorer", "config/config.schema.yaml")
#: The agents and tasks (scorers) a campaign runs: taken from the campaign's working
#: directory when it has them (else the checkout's), frozen with the code.
CAMPAIGN_PATHS = ("agents", "tasks")
HARNESS_PATHS = CODE_PATHS + CAMPAIGN_PATHS
SNAPSHOT_DIR = ".ptb-harness"
#: Set by `ptb-harness run` for the jobs: the checkout's git state at launch.
GIT_ENV = "PTB_HARNESS_GIT"
#: Set by `ptb-harness run` for the jobs: the snapshot, whose agents/ and tasks/ the
#: campaign reads instead of the working directory's (see Campaign.agents_dir).
SNAPSHOT_ENV = "PTB_HARNESS_SNAPSHOT"


def harness_root() -> Path:
    """The root of the harness this code runs from (a checkout or a snapshot)."""
    return Path(__file__).resolve().parents[3]


def _files(root: Path, workdir: Path | None = None) -> list[tuple[str, Path]]:
    """(relative path, file or link) of everything frozen: code from root, agents/ and
    tasks/ from workdir where it has them. A link (a task's ptb_scorer -> src/ptb_scorer)
    is frozen as the link, not followed: relative, it points into the snapshot too."""
    out = []
    for rel in HARNESS_PATHS:
        base = workdir if workdir is not None and rel in CAMPAIGN_PATHS and (workdir / rel).is_dir() else root
        p = base / rel
        if p.is_file():
            out.append((rel, p))
            continue
        for dirpath, dirs, names in os.walk(p):
            here = Path(dirpath)
            dirs[:] = [d for d in dirs if d != "__pycache__" and not (here / d).is_symlink()]
            links = [d for d in os.listdir(here) if (here / d).is_symlink() and (here / d).is_dir()]
            for name in [*names, *links]:
                f = here / name
                if f.suffix != ".pyc" and (f.is_symlink() or f.is_file()):
                    out.append((str(f.relative_to(base)), f))
    return sorted(set(out))


def harness_digest(root: Path | None = None, workdir: Path | None = None) -> str:
    """sha256 over the harness's files (paths and contents; a link's target path)."""
    root = root or harness_root()
    h = hashlib.sha256()
    for rel, f in _files(root, workdir):
        h.update(rel.encode() + b"\0")
        h.update((b"link:" + os.readlink(f).encode() if f.is_symlink() else f.read_bytes()) + b"\0")
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
    """The snapshot of the harness (and the workdir's agents and tasks) under workdir,
    made once per distinct content."""
    root = root or harness_root()
    workdir = Path(workdir).resolve()
    digest = harness_digest(root, workdir)
    dest = workdir / SNAPSHOT_DIR / digest[:16]
    if dest.is_dir():
        return dest
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, f in _files(root, workdir):
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if f.is_symlink():
            os.symlink(os.readlink(f), target)
        else:
            shutil.copy2(f, target)
    try:
        os.rename(tmp, dest)
    except OSError:  # another run made the same snapshot meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def frozen_dir(configured: Path, workdir: Path) -> Path:
    """Where a campaign reads its agents or tasks: the snapshot's copy under
    `ptb-harness run` when `configured` is the working directory's agents/ or tasks/."""
    snap = os.environ.get(SNAPSHOT_ENV)
    if snap:
        for rel in CAMPAIGN_PATHS:
            if configured == (workdir / rel).resolve() and (Path(snap) / rel).is_dir():
                return Path(snap) / rel
    return configured


@functools.lru_cache(maxsize=1)
def _provenance() -> tuple[tuple[str, str | None], ...]:
    root = harness_root()
    snap = root.parent.name == SNAPSHOT_DIR
    return (("digest", harness_digest(root)), ("git", git_state(root)), ("snapshot", str(root) if snap else None))


def provenance() -> dict[str, str | None]:
    """The harness's digest, git state and snapshot dir; computed once per process (it
    hashes the harness's files and asks git twice)."""
    return dict(_provenance())
