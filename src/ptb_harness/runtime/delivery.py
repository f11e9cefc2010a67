"""Delivering what an agent left in its job dir to the results tree, without trusting it.

The agent controls every byte under its job dir, so the harness never follows a link out
of it: each entry is inspected with lstat, and only regular files and directories are
delivered. A symbolic link (to /etc, to another cell's model, to a host secret, to
/dev/zero), a device, a FIFO or a socket anywhere in the tree, a tree larger than the
site's cap in bytes or in files, or a file holding the value of a secret the harness
knows means nothing is delivered and the cell's solve record says why (an agent outcome,
never a crash). A delivered tree is made durable with one sync of its filesystem, never
an fsync per file.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ptb_harness.core.records import sync_filesystem

#: Bytes read per step of the secret scan.
SCAN_BLOCK = 8 * 2**20


@dataclass(frozen=True)
class Delivery:
    """What delivery found: whether the agent left the entry, its regular files and
    bytes, and why nothing was delivered (None when it was)."""

    present: bool
    files: int = 0
    size: int = 0
    problem: str | None = None


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def inspect_tree(root: Path, label: str, max_bytes: int, max_files: int) -> tuple[list[Path], int, str | None]:
    """(regular files, total bytes, problem) of the tree at root, read with lstat only.
    Entries are counted as they are listed: a tree of more than ``max_files`` files and
    directories is refused at the first one over, whatever its size (400,000 empty files
    take a second to refuse, not the minutes copying them would)."""
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return [], 0, None
    if not stat.S_ISDIR(st.st_mode):
        what = f"{_kind(st.st_mode)} to {os.readlink(root)}" if stat.S_ISLNK(st.st_mode) else _kind(st.st_mode)
        return [], 0, f"{label} is {what}, not a directory; nothing delivered"
    files: list[Path] = []
    size = entries = 0
    stack = [root]
    while stack:
        here = stack.pop()
        with os.scandir(here) as listing:
            for e in listing:
                entries += 1
                if entries > max_files:
                    return files, size, f"{label} holds more than {max_files} files and directories; nothing delivered"
                st = e.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(Path(e.path))
                elif stat.S_ISREG(st.st_mode):
                    files.append(Path(e.path))
                    size += st.st_size
                    if size > max_bytes:
                        return files, size, f"{label} holds more than {max_bytes / 1e9:g} GB; nothing delivered"
                else:
                    rel = f"{label}/{Path(e.path).relative_to(root)}"
                    why = f"{rel} is {_kind(st.st_mode)}; only regular files and directories are delivered"
                    return files, size, why
    return files, size, None


def find_secret(files: Sequence[Path], root: Path, label: str, needles: Sequence[tuple[bytes, str]]) -> str | None:
    """'<label> contains the value of NAME (in <file>)' for the first secret found."""
    if not needles:
        return None
    overlap = max(len(n) for n, _ in needles) - 1
    for path in files:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            tail = b""
            while block := f.read(SCAN_BLOCK):
                data = tail + block
                for needle, name in needles:
                    if needle in data:
                        name, _, form = name.partition(":")
                        rel = f"{label}/{path.relative_to(root)}"
                        return f"{label} contains the value of {name}{f' ({form})' if form else ''} (in {rel})"
                tail = data[-overlap:] if overlap else b""
    return None


def deliver_tree(
    src: Path,
    dst: Path,
    *,
    label: str,
    max_bytes: int,
    max_files: int,
    needles: Sequence[tuple[bytes, str]] = (),
    refuse: str | None = None,
) -> Delivery:
    """Move the tree at src to dst when it passes every check (and `refuse`, a reason
    decided before, is None); otherwise dst is left an empty directory. Links are never
    followed (src is the agent's). The delivered tree is on disk when this returns: one
    sync of the filesystem, not one per file."""
    present = os.path.lexists(src)
    files, size, problem = ([], 0, refuse) if refuse else inspect_tree(src, label, max_bytes, max_files)
    if problem is None and files:
        problem = find_secret(files, src, label, needles)
    if dst.exists() or dst.is_symlink():
        shutil.rmtree(dst) if dst.is_dir() and not dst.is_symlink() else dst.unlink()
    dst.parent.mkdir(parents=True, exist_ok=True)
    if problem is not None or not present:
        dst.mkdir()
        return Delivery(present, 0, 0, problem)
    try:
        os.rename(src, dst)
    except OSError:  # another filesystem: copied whole beside dst, then renamed into place
        _copy_then_rename(src, dst)
    sync_filesystem(dst)  # what the agent wrote (or the copy) is on disk before any record names it
    return Delivery(present, len(files), size, None)


def _copy_then_rename(src: Path, dst: Path) -> None:
    """Copy src (files and directories only: inspected) to a hidden dir beside dst, sync
    it, rename it to dst: a crash leaves a `.<name>.partial-*` dir, never half a dst."""
    for stale in dst.parent.glob(f".{dst.name}.partial-*"):  # an earlier try's, cut short
        shutil.rmtree(stale, ignore_errors=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{dst.name}.partial-", dir=dst.parent))
    try:
        shutil.copytree(src, partial / "tree", symlinks=True, copy_function=shutil.copyfile)
        sync_filesystem(partial)
        os.rename(partial / "tree", dst)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def deliver_file(src: Path, dst: Path, label: str) -> str | None:
    """Move a regular file into place (across disks: copy beside dst, then rename); a
    link or anything else at src is not delivered and the reason is returned."""
    try:
        st = os.lstat(src)
    except FileNotFoundError:
        return f"{label} is missing"
    if not stat.S_ISREG(st.st_mode):
        return f"{label} is {_kind(st.st_mode)}; not delivered"
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(src, dst)
    except OSError:
        tmp = dst.with_name(f".{dst.name}.tmp")
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f, open(tmp, "wb") as out:
            shutil.copyfileobj(f, out, 1 << 20)
        os.replace(tmp, dst)
    return None
