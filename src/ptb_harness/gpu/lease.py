"""Leases: one card per job on machines without a scheduler (``site.gpu_pool``).

One public entry, ``lease_gpus``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from ptb_harness.core.errors import HarnessError


def _lock_path(lock_dir: Path, gpu_id: str) -> Path:
    return lock_dir / f"gpu-{gpu_id.replace('/', '_')}.lock"


def _try_take(pool: Sequence[str], count: int, lock_dir: Path) -> list[tuple[str, int]] | None:
    """``count`` free cards of the pool, locked; None (holding nothing) if fewer are free."""
    held: list[tuple[str, int]] = []
    for gpu_id in pool:
        fd = os.open(_lock_path(lock_dir, gpu_id), os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        held.append((gpu_id, fd))
        if len(held) == count:
            return held
    for _, fd in held:
        os.close(fd)
    return None


@contextlib.contextmanager
def lease_gpus(
    pool: Sequence[str], count: int, lock_dir: Path, timeout_s: float = 7 * 86400, poll_s: float = 1.0
) -> Iterator[list[str]]:
    """Hold ``count`` ids of ``pool`` exclusively for the with-block.

    An flock per card: released by the kernel when the holder exits however it exits,
    so a killed job never leaves a card leased. All-or-nothing, so two jobs each
    holding half of what they need cannot wait on each other forever.
    """
    if count > len(pool):
        raise HarnessError(f"site.gpu_pool has {len(pool)} GPU(s), the cell needs {count}")
    lock_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(PermissionError):
        lock_dir.chmod(0o1777)  # every user of the machine leases from the same pool
    deadline = time.monotonic() + timeout_s
    while (held := _try_take(pool, count, lock_dir)) is None:
        if time.monotonic() > deadline:
            raise HarnessError(f"no {count} free GPU(s) in site.gpu_pool after {timeout_s:.0f} s")
        time.sleep(poll_s)
    try:
        yield [g for g, _ in held]
    finally:
        for _, fd in held:
            os.close(fd)
