"""A read-only FUSE passthrough that sleeps before every filesystem call: a stand-in for a
network filesystem (NFS, Lustre, sshfs), where reading a small file costs latency, not CPU.

    python bench/slowfs.py SOURCE MOUNTPOINT DELAY_MS      (foreground; fusermount -u to stop)

Every getattr, readdir, open and read waits DELAY_MS first; calls run on FUSE's threads,
so concurrent callers wait concurrently, as on a network filesystem. Needs fusepy
(`pip install fusepy==3.0.1`, the `bench` extra) and libfuse2 (Debian: libfuse2).
"""

from __future__ import annotations

import errno
import os
import sys
import time

from fuse import FUSE, FuseOSError, Operations


class SlowPassthrough(Operations):
    def __init__(self, root: str, delay_s: float) -> None:
        self.root = os.path.realpath(root)
        self.delay_s = delay_s

    def _path(self, path: str) -> str:
        time.sleep(self.delay_s)
        return os.path.join(self.root, path.lstrip("/"))

    def getattr(self, path, fh=None):
        try:
            st = os.lstat(self._path(path))
        except OSError as e:
            raise FuseOSError(e.errno) from None
        keys = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid")
        return {k: getattr(st, k) for k in keys}

    def readdir(self, path, fh):
        return [".", "..", *os.listdir(self._path(path))]

    def open(self, path, flags):
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise FuseOSError(errno.EROFS)
        return os.open(self._path(path), flags)

    def read(self, path, size, offset, fh):
        time.sleep(self.delay_s)
        return os.pread(fh, size, offset)

    def release(self, path, fh):
        os.close(fh)


def main() -> None:
    source, mountpoint, delay_ms = sys.argv[1], sys.argv[2], float(sys.argv[3])
    # no kernel caching of attributes or entries: every call reaches the (slow) server
    FUSE(
        SlowPassthrough(source, delay_ms / 1000),
        mountpoint,
        foreground=True,
        nothreads=False,
        ro=True,
        attr_timeout=0,
        entry_timeout=0,
        negative_timeout=0,
    )


if __name__ == "__main__":
    main()
