"""The sandbox's view of the site's shared Hugging Face home.

Modes (site knob ``hf_cache_mode``): ``overlay`` mounts a fuse-overlayfs view whose lower
layer is the shared cache and whose upper layer is the job dir, so a sandbox can
download into "the cache" without ever writing the shared copy; ``ro`` binds the shared
cache read-only; ``none`` gives each cell an empty cache in its own HOME.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ptb_harness.core.errors import HarnessError


@dataclass(frozen=True)
class HfCacheSettings:
    """The site's shared Hugging Face home (site.hf_home) and how sandboxes see it
    (site.hf_cache_mode)."""

    home: Path | None = None
    mode: str = "none"


def _unmount(mountpoint: Path) -> None:
    for tool in ("fusermount3", "fusermount"):
        if shutil.which(tool):
            subprocess.run([tool, "-u", str(mountpoint)], check=False, capture_output=True)
            return


@contextlib.contextmanager
def hf_cache_view(settings: HfCacheSettings, job_root: Path) -> Iterator[tuple[Path | None, bool]]:
    """Yield (host path of the HF home the sandbox sees, whether it is read-only)."""
    shared_path, mode = settings.home, settings.mode
    if shared_path is None or mode == "none":
        yield None, False
        return
    if not shared_path.is_dir():
        raise HarnessError(f"site.hf_home: {shared_path} is not a directory")
    if mode == "ro":
        yield shared_path, True
        return
    tool = shutil.which("fuse-overlayfs")
    if tool is None:
        raise HarnessError("site.hf_cache_mode=overlay needs fuse-overlayfs on PATH (or choose ro / none)")
    upper, work, merged = job_root / "hf_upper", job_root / "hf_work", job_root / "hf_merged"
    for d in (upper, work, merged):
        d.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(
        [tool, "-o", f"lowerdir={shared_path},upperdir={upper},workdir={work}", str(merged)],
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        raise HarnessError(f"fuse-overlayfs could not mount the HF cache: {res.stderr.strip()[:300]}")
    try:
        yield merged, False
    finally:
        _unmount(merged)
