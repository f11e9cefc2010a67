"""The first thing a launched agent runs: join the cell's cgroup, set the rlimits, then
execute the agent's command in place (same pid, same session and process group, so the
harness's stop sequence reaches it unchanged).

    python -I -S confine.py '{"procs": [...], "rlimits": [[RES, SOFT, HARD], ...]}' -- ARGV...

Its own process is the cell's first: everything the agent starts is forked inside the
cgroup, and no process of the harness ever is. Standard library only, and run with -I -S
(the agent's environment cannot change what it imports). A failure is one line on
stderr starting ``ptb-harness: confine:`` and exit status 126, before the agent runs.
"""

from __future__ import annotations

import json
import os
import resource
import sys

FAILED = 126
PREFIX = "ptb-harness: confine: "


def confine_argv(python: str, procs: list[str], rlimits: list[tuple[int, int, int]], argv: list[str]) -> list[str]:
    """The command line that confines ``argv`` (run by ``python``)."""
    spec = json.dumps({"procs": procs, "rlimits": [list(r) for r in rlimits]}, separators=(",", ":"))
    return [python, "-I", "-S", os.path.abspath(__file__), spec, "--", *argv]


def _set_rlimit(res: int, soft: int, hard: int) -> None:
    """Set (soft, hard). Where this process may not raise the hard limit that far (not
    root), the current hard limit stays and the soft one goes as near as it allows."""
    try:
        resource.setrlimit(res, (soft, hard))
    except (ValueError, OSError):
        _, cur_hard = resource.getrlimit(res)  # finite: an infinite one could be kept
        resource.setrlimit(res, (min(soft, cur_hard), cur_hard))


def main(args: list[str]) -> int:
    if len(args) < 3 or args[1] != "--":
        print(f"{PREFIX}usage: confine.py SPEC -- ARGV...", file=sys.stderr)
        return FAILED
    spec = json.loads(args[0])
    pid = str(os.getpid()).encode()
    try:
        for path in spec["procs"]:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)
    except OSError as e:
        print(f"{PREFIX}cannot join the cell's cgroup ({e.filename}: {e.strerror})", file=sys.stderr)
        return FAILED
    try:
        for res, soft, hard in spec["rlimits"]:
            _set_rlimit(res, soft, hard)
    except (ValueError, OSError) as e:
        print(f"{PREFIX}cannot set rlimits ({e})", file=sys.stderr)
        return FAILED
    try:
        os.execvp(args[2], args[2:])
    except OSError as e:
        print(f"{PREFIX}cannot execute {args[2]} ({e.strerror})", file=sys.stderr)
        return 127
    return FAILED  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
