"""Whether the kernel lets bwrap make the unprivileged sandbox, and one line when it does not.

The bwrap runtime always makes its own user namespace (``--unshare-user``): inside it the
agent holds no capability of the host's, even when the harness runs as root. Kernels can
refuse that, for everyone or for unprivileged users only; each way has its own sysctl:

- ``user.max_user_namespaces`` = 0 refuses every user namespace, root's too;
- ``kernel.unprivileged_userns_clone`` = 0 (Debian and Ubuntu kernels) refuses them to
  non-root users;
- ``kernel.apparmor_restrict_unprivileged_userns`` = 1 (Ubuntu 23.10 and later) refuses
  them to non-root programs without an AppArmor profile that allows them.

``userns_problem`` starts bwrap once with a user namespace and, when that fails, names the
sysctl that explains it; ``check_userns`` raises it as the one config error a run (and
``doctor``) prints before any cell starts.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from ptb_harness.core.errors import ConfigError

#: sysctl name -> its file
SYSCTLS = {
    "user.max_user_namespaces": "/proc/sys/user/max_user_namespaces",
    "kernel.unprivileged_userns_clone": "/proc/sys/kernel/unprivileged_userns_clone",
    "kernel.apparmor_restrict_unprivileged_userns": "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
}
#: sysctl -> (the value that refuses, whether it refuses root too, the setting that allows)
_REFUSING = {
    "user.max_user_namespaces": ("0", True, "user.max_user_namespaces=15000"),
    "kernel.unprivileged_userns_clone": ("0", False, "kernel.unprivileged_userns_clone=1"),
    "kernel.apparmor_restrict_unprivileged_userns": ("1", False, "kernel.apparmor_restrict_unprivileged_userns=0"),
}


def read_sysctls(read: Callable[[str], str] = lambda p: Path(p).read_text()) -> dict[str, str | None]:
    """The three sysctls' values (None where this kernel has no such sysctl)."""
    values: dict[str, str | None] = {}
    for name, path in SYSCTLS.items():
        try:
            values[name] = read(path).strip()
        except OSError:
            values[name] = None
    return values


def refusing_sysctl(values: Mapping[str, str | None], root: bool) -> tuple[str, str] | None:
    """(``name = value``, the setting that allows it) of the sysctl that refuses this user
    (root or not) a user namespace, or None when none of them does."""
    for name, (refuses, for_root, allow) in _REFUSING.items():
        if values.get(name) == refuses and (for_root or not root):
            return f"{name} = {refuses}", allow
    return None


def refusal_line(bwrap_error: str, values: Mapping[str, str | None], root: bool) -> str:
    """The one line that says why runtime bwrap cannot run here and what to change."""
    who = "root" if root else "this (non-root) user"
    found = refusing_sysctl(values, root)
    if found is not None:
        setting, allow = found
        return (
            f"site.runtime: bwrap needs user namespaces, and the kernel refuses them to {who} ({setting}): "
            f"sysctl -w {allow}, or use site.runtime: apptainer"
        )
    return (
        f"site.runtime: bwrap cannot make a user namespace for {who} ({bwrap_error}); check the sysctls "
        f"{', '.join(SYSCTLS)} (or a seccomp/LSM policy), or use site.runtime: apptainer"
    )


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


@functools.lru_cache(maxsize=8)
def userns_problem(bwrap: str) -> str | None:
    """None when ``bwrap`` can make a user namespace here, else the one line why not.
    Cached per process: the kernel's answer does not change while a job runs."""
    argv = [bwrap, "--unshare-user", "--unshare-net", "--cap-drop", "ALL", "--ro-bind", "/", "/", "true"]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return refusal_line(str(e), read_sysctls(), os.geteuid() == 0)
    if res.returncode == 0:
        return None
    return refusal_line(_last_line(res.stderr) or f"exit code {res.returncode}", read_sysctls(), os.geteuid() == 0)


def check_userns(bwrap: str) -> None:
    """Raise the refusal line as a ConfigError (runs check this before any cell starts)."""
    problem = userns_problem(bwrap)
    if problem:
        raise ConfigError(problem)


@functools.lru_cache(maxsize=8)
def bwrap_version(bwrap: str) -> tuple[int, ...]:
    """bwrap's version (``bubblewrap 0.8.0`` -> (0, 8, 0)); () when it does not say."""
    try:
        out = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(g) for g in m.groups() if g is not None) if m else ()
