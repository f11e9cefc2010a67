"""What a process sees of its own privileges, namespaces and limits, as one JSON line.

Stdlib only, and importing nothing of the harness: ``doctor`` runs this file's text with
the sandbox's interpreter inside a real sandbox (``python -I -S -c``), where the harness's
package is out of sight, and compares the answer with the host's (``probe()`` here). The
arguments are HOST:PORT targets it tries to connect to.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import socket
import sys

NAMESPACES = ("user", "mnt", "pid", "ipc", "uts", "cgroup", "net")
STATUS_FIELDS = ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")
#: the rlimits the harness's caps are about, as /proc/self/limits names them
LIMITS = ("Max open files", "Max processes", "Max file size", "Max core file size", "Max address space")
_CLONE_NEWUSER = 0x10000000


def _status() -> dict[str, str]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in STATUS_FIELDS:
                out[key] = value.strip()
    return out


def _limits() -> dict[str, str]:
    out = {}
    with open("/proc/self/limits") as f:
        for line in f:
            for name in LIMITS:
                if line.startswith(name):
                    soft = line[len(name) :].split()
                    out[name] = soft[0] if soft else "?"
    return out


def _nested_userns() -> str:
    """'allowed' or the errno name of unshare(CLONE_NEWUSER) in a child (the probe itself
    stays in its namespace)."""
    pid = os.fork()
    if pid == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        rc = libc.unshare(_CLONE_NEWUSER)
        os._exit(0 if rc == 0 else min(ctypes.get_errno(), 255))
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return "allowed" if code == 0 else f"refused ({os.strerror(code)})"


def _proc_sys_writable() -> bool:
    """Whether /proc/sys's files are open for writing (checked on one, opened and closed
    without a write: nothing of the host changes)."""
    try:
        fd = os.open("/proc/sys/kernel/core_pattern", os.O_WRONLY)
    except OSError:
        return False
    os.close(fd)
    return True


def _connect(target: str) -> str:
    """'reached' or the errno name of a TCP connect to HOST:PORT (10 s at most)."""
    host, port = target.rsplit(":", 1)
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.settimeout(10)
    try:
        s.connect((host, int(port)))
        return "reached"
    except OSError as e:
        return errno.errorcode.get(e.errno or 0, str(e))
    finally:
        s.close()


def probe(targets: list[str] | tuple[str, ...] = ()) -> dict:
    ns = {}
    for name in NAMESPACES:
        try:
            ns[name] = os.readlink(f"/proc/self/ns/{name}")
        except OSError:
            ns[name] = None
    return {
        "uid": os.getuid(),
        "hostname": socket.gethostname(),
        "status": _status(),
        "namespaces": ns,
        "limits": _limits(),
        "cgroup": open("/proc/self/cgroup").read().strip().splitlines(),
        "nested_userns": _nested_userns(),
        "proc_sys_writable": _proc_sys_writable(),
        "connect": {t: _connect(t) for t in targets},
    }


if __name__ == "__main__":
    print(json.dumps(probe(sys.argv[1:])))
