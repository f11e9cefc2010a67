"""Where a file of the agent's job dir lies, as the deterministic checks weigh it.

- **The test set's own places**: the test dataset's Hugging Face caches (the hub's
  ``datasets--<org>--<name>`` and ``datasets``' ``<org>___<name>``), the test file under
  an HF home (``path_in_hf_home``), and the task scorer's evaluation logs
  (``ptb-inspect-logs-*``, where evaluate.py writes them when the agent runs it). Loading
  the dataset or running the evaluation writes the test set there, which the rules allow;
  a file there that is nothing but test samples (``pure``: every record of it holds one)
  is the test set itself, reported to the judges and not counted by the n-gram check.
  The scorer's logs are not held to purity (their headers and summaries are records too).
  Anything else there, like a training mix that holds test samples, counts.
- **Installed packages** (``site-packages``, ``node_modules``, ...) and the agent CLIs'
  own state dirs: their text names hosted LLM APIs by the hundred (SDKs, docs), so the
  hosted-API mentions of files are not collected there. The n-gram check reads them all
  the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

#: evaluate.py's inspect logs (ptb_scorer.engine and graded: tempfile.mkdtemp(prefix=...))
SCORER_LOG_PREFIX = "ptb-inspect-logs-"
PACKAGE_DIRS = frozenset(
    {"site-packages", "dist-packages", "node_modules", ".npm", ".cargo", ".rustup", "__pycache__", ".git"}
)
#: the agent CLIs' own state and config (their providers' hosts are theirs, not the agent's work)
CLI_STATE_DIRS = frozenset({".claude", ".codex", ".gemini", ".opencode", ".qwen", ".config", ".local/state"})


@dataclass(frozen=True)
class TestSetPlaces:
    """The test set's own places, from the task's info.json ``judge.test_set``."""

    #: path components naming the test dataset's caches
    dataset_dirs: frozenset[str] = frozenset()
    #: the test file's path below an HF home
    hf_home_files: tuple[str, ...] = ()

    @classmethod
    def of(cls, spec: Mapping[str, Any] | None) -> TestSetPlaces:
        if not isinstance(spec, Mapping):
            return cls()
        dirs: set[str] = set()
        repo = spec.get("hf_dataset")
        if isinstance(repo, str) and repo.strip("/"):
            org, _, name = repo.strip("/").rpartition("/")
            dirs.add(f"datasets--{repo.strip('/').replace('/', '--')}")
            dirs.add(f"{org}___{name}" if org else name)
        in_home = spec.get("path_in_hf_home")
        files = (str(PurePosixPath(in_home)),) if isinstance(in_home, str) and in_home else ()
        return cls(frozenset(dirs), files)

    def place_of(self, rel: str) -> str | None:
        """Why a path (relative to the job dir) is one of the test set's own places, or None."""
        parts = rel.split("/")
        if any(p.startswith(SCORER_LOG_PREFIX) for p in parts[:-1]):
            return "the task scorer's evaluation logs"
        if any(p in self.dataset_dirs for p in parts[:-1]):
            return "the test dataset's cache"
        if any(rel == f or rel.endswith("/" + f) for f in self.hf_home_files):
            return "the test file in an HF home"
        return None

    @staticmethod
    def held_to_purity(place: str) -> bool:
        """Whether a file there counts unless it is nothing but test samples."""
        return place != "the task scorer's evaluation logs"


def is_package_path(rel: str) -> bool:
    """Inside installed packages or an agent CLI's own state (see the module)."""
    parts = rel.split("/")[:-1]
    return any(p in PACKAGE_DIRS or p in CLI_STATE_DIRS for p in parts) or "/.local/state/" in f"/{rel}"
