"""The datasets a task reads, offline: what must be in the HF cache, and which revision it holds.

Scoring jobs run with HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1 (compute nodes often
have no internet): `datasets` then reads only its own Arrow cache
(``<datasets cache>/<org>___<name>/<config>/<version>/<hash>/``). A dataset missing
there would make inspect_evals retry for minutes; :func:`require` says so in one line
first. Each task's info.json lists its datasets; ``ptb-harness prefetch`` fills the
cache, and the harness's plan checks it with the same :func:`missing` (standard library
only, so the harness can import it).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class DataMissing(Exception):
    """A dataset the task reads is not in the cache."""


@dataclass(frozen=True)
class CacheLayout:
    """Where `datasets`, huggingface_hub and inspect_evals keep their files."""

    hf_home: Path
    datasets: Path
    hub: Path
    inspect_evals: Path

    @classmethod
    def under(cls, hf_home: Path) -> CacheLayout:
        """The layout the harness's sandboxes name (HF_HOME, HF_HOME/hub, HF_HOME/datasets)."""
        hf_home = Path(hf_home)
        return cls(hf_home, hf_home / "datasets", hf_home / "hub", hf_home / "inspect_evals")

    @classmethod
    def from_env(cls) -> CacheLayout:
        home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
        return cls(
            home,
            Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets"),
            Path(os.environ.get("HF_HUB_CACHE") or home / "hub"),
            Path(os.environ.get("INSPECT_EVALS_CACHE_DIR") or home / "inspect_evals"),
        )


def config_dir_name(spec: dict[str, Any]) -> str:
    """The config folder `datasets` names its Arrow cache by (name, or default-data_dir=...)."""
    if spec.get("name"):
        return str(spec["name"])
    if spec.get("data_dir"):
        return f"default-data_dir={spec['data_dir']}"
    return "default"


def arrow_builds(spec: dict[str, Any], layout: CacheLayout) -> list[Path]:
    """The cached builds of an HF dataset (their dataset_info.json), newest last."""
    base = layout.datasets / spec["path"].replace("/", "___") / config_dir_name(spec)
    return sorted(base.glob("*/*/dataset_info.json"), key=lambda p: p.stat().st_mtime)


def describe(spec: dict[str, Any]) -> str:
    if spec["kind"] == "hf_dataset":
        return f"dataset {spec['path']} ({config_dir_name(spec)})"
    if spec["kind"] == "file":
        return f"file {spec['path']} (from {spec['url']})"
    return f"inspect_evals files {', '.join(spec['files'])}"


def missing(spec: dict[str, Any], layout: CacheLayout) -> str | None:
    """What of one dataset entry of a task's info.json is not cached, or None."""
    if spec["kind"] == "hf_dataset":
        return None if arrow_builds(spec, layout) else f"{describe(spec)} not in {layout.datasets}"
    if spec["kind"] == "file":  # a plain download kept under the HF home (the graded tasks' data)
        return None if (layout.hf_home / spec["path"]).is_file() else f"{describe(spec)} not in {layout.hf_home}"
    if spec["kind"] == "inspect_evals_cache":
        absent = [f for f in spec["files"] if not (layout.inspect_evals / f).is_file()]
        return f"inspect_evals files {', '.join(absent)} not in {layout.inspect_evals}" if absent else None
    raise ValueError(f"unknown dataset kind {spec['kind']!r}")


def fetch_file(spec: dict[str, Any], layout: CacheLayout, timeout_s: float = 300) -> Path:
    """Download a `file` dataset to its place under the HF home (atomically); for prefetch."""
    import urllib.request

    dest = layout.hf_home / spec["path"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    with urllib.request.urlopen(spec["url"], timeout=timeout_s) as response, open(tmp, "wb") as out:
        while chunk := response.read(1 << 20):
            out.write(chunk)
    tmp.replace(dest)
    return dest


def require(specs: list[dict[str, Any]], layout: CacheLayout | None = None) -> None:
    layout = layout or CacheLayout.from_env()
    gaps = [m for m in (missing(s, layout) for s in specs) if m]
    if gaps:
        raise DataMissing("; ".join(gaps) + " (run `ptb-harness prefetch` where there is internet)")


def revision(spec: dict[str, Any], layout: CacheLayout | None = None) -> dict[str, Any]:
    """Which data the cache holds: the hub commit(s) downloaded and the Arrow build read."""
    layout = layout or CacheLayout.from_env()
    if spec["kind"] == "file":
        path = layout.hf_home / spec["path"]
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        return {"url": spec["url"], "path": spec["path"], "sha256": digest}
    if spec["kind"] != "hf_dataset":
        return {"source": spec.get("source"), "files": spec["files"]}
    snaps = layout.hub / f"datasets--{spec['path'].replace('/', '--')}" / "snapshots"
    builds = arrow_builds(spec, layout)
    return {
        "path": spec["path"],
        "pinned": spec.get("revision"),
        "hub_commits": sorted(p.name for p in snaps.iterdir()) if snaps.is_dir() else [],
        "arrow_build": str(builds[-1].parent.relative_to(layout.datasets)) if builds else None,
    }
