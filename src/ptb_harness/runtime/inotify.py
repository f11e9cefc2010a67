"""Linux inotify through libc (ctypes): watches on directories, events read without
blocking. What the evidence recorder is woken by when the agent closes a file it wrote."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
from collections.abc import Iterator
from dataclasses import dataclass

IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
#: what the recorder watches each directory for
MASK = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_DELETE_SELF
_HEADER = struct.Struct("iIII")


@dataclass(frozen=True)
class Event:
    """One event: the watched directory, the entry's name in it ('' for the directory)."""

    directory: str
    name: str
    mask: int

    @property
    def is_dir(self) -> bool:
        return bool(self.mask & IN_ISDIR)


class WatchError(OSError):
    """A directory could not be watched (the watch limit, or it is gone)."""


class Inotify:
    """One inotify instance; directories watched by path."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        self.fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self._dirs: dict[int, str] = {}

    @property
    def watched(self) -> int:
        return len(self._dirs)

    def watch(self, directory: str) -> None:
        """Watch a directory (not a link to one) for MASK; raises WatchError."""
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(directory), MASK | IN_ONLYDIR | IN_DONT_FOLLOW)
        if wd < 0:
            err = ctypes.get_errno()
            raise WatchError(err, f"inotify_add_watch {directory}: {os.strerror(err)}")
        self._dirs[wd] = directory

    def read(self, timeout: float) -> Iterator[Event]:
        """The events queued within timeout seconds (none when nothing happened)."""
        ready, _, _ = select.select([self.fd], [], [], max(timeout, 0))
        if not ready:
            return
        try:
            data = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return
        pos = 0
        while pos + _HEADER.size <= len(data):
            wd, mask, _cookie, size = _HEADER.unpack_from(data, pos)
            raw = data[pos + _HEADER.size : pos + _HEADER.size + size]
            pos += _HEADER.size + size
            name = os.fsdecode(raw.split(b"\0", 1)[0])
            if mask & IN_IGNORED:
                self._dirs.pop(wd, None)
                continue
            directory = self._dirs.get(wd, "")
            if mask & IN_Q_OVERFLOW or directory:
                yield Event(directory, name, mask)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Inotify:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NoWatch:
    """Where inotify is not to be had: no directory is watched, no event comes (the
    recorder then walks only)."""

    fd = -1
    watched = 0

    def watch(self, directory: str) -> None:
        raise WatchError(0, "inotify is not available")

    def read(self, timeout: float) -> Iterator[Event]:
        select.select([], [], [], max(timeout, 0))
        return iter(())

    def close(self) -> None:
        pass


def max_user_watches() -> int | None:
    """The kernel's limit of watches per user (fs.inotify.max_user_watches), None unknown."""
    try:
        with open("/proc/sys/fs/inotify/max_user_watches") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None
