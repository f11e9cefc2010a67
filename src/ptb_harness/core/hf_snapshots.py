"""Which snapshot of a Hugging Face repo a cache holds: the one place that maps a repo id
to its folder in a hub cache (``<hub>/models--org--name``) and picks the snapshot.

The pick is huggingface_hub's own offline rule (``try_to_load_from_cache``): the revision
(default ``main``) is looked up in ``refs/``, whose file names the commit; a revision
without a ref is taken as the commit itself; the snapshot is ``snapshots/<commit>``.
So the plan's checks, the template the scorer gets and the files transformers or vLLM
load offline are the same snapshot, never "the last name in sort order". Standard
library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO_TYPES = {"model": "models", "dataset": "datasets", "space": "spaces"}
#: a repo id as the hub spells it: one owner, one name
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Snapshot:
    """A cached snapshot: its folder and the commit it holds."""

    repo_id: str
    path: Path
    commit: str

    def file(self, name: str) -> Path | None:
        """A file of the snapshot (huggingface_hub links it into the blobs), or None."""
        p = self.path / name
        return p if p.is_file() else None


def is_repo_id(value: str) -> bool:
    return bool(_REPO_ID.match(value)) and ".." not in value


def repo_dir(hub: Path, repo_id: str, repo_type: str = "model") -> Path:
    """``<hub>/models--org--name`` (or ``datasets--``, ``spaces--``)."""
    return Path(hub) / f"{REPO_TYPES[repo_type]}--{repo_id.replace('/', '--')}"


def resolve_snapshot(hub: Path, repo_id: str, revision: str | None = None, repo_type: str = "model") -> Snapshot | None:
    """The snapshot huggingface_hub reads offline for ``revision`` (default ``main``), or
    None when the cache does not hold it."""
    if not is_repo_id(repo_id):
        return None
    root = repo_dir(hub, repo_id, repo_type)
    revision = revision or "main"
    ref = root / "refs" / revision
    try:
        # read as huggingface_hub reads it (not stripped: a ref it cannot use, we cannot either)
        commit = ref.read_text(encoding="utf-8") if ref.is_file() else revision
    except OSError:
        return None
    if not commit or "/" in commit or "\n" in commit or commit in (".", ".."):
        return None
    path = root / "snapshots" / commit
    return Snapshot(repo_id, path, commit) if path.is_dir() else None
