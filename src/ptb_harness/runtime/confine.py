"""The first thing a launched agent runs: join the cell's cgroup, set the rlimits, then
execute the agent's command in place (same pid, same session and process group, so the
harness's stop sequence reaches it unchanged).

    python -I -S confine.py [--join CGROUP_PROCS]... [--rlimit RES:SOFT:HARD]... -- ARGV...

Its own process is the cell's first: everything the agent starts is forked inside the
cgroup, and no process of the harness ever is. Standard library only, and run with -I -S
(the agent's environment cannot change what it imports). It starts with every launch of
an agent, so it imports C modules only (no json, whose import of re took 20 of its 36 ms
here). A failure is one line on stderr starting ``ptb-harness: confine:`` and exit
status 126, before the agent runs.
"""

from __future__ import annotations

import os
import resource
import sys

FAILED = 126
PREFIX = "ptb-harness: confine: "


def confine_argv(python: str, procs: list[str], rlimits: list[tuple[int, int, int]], argv: list[str]) -> list[str]:
    """The command line that confines ``argv`` (run by ``python``)."""
    spec = [arg for path in procs for arg in ("--join", path)]
    spec += [arg for res, soft, hard in rlimits for arg in ("--rlimit", f"{res}:{soft}:{hard}")]
    return [python, "-I", "-S", os.path.abspath(__file__), *spec, "--", *argv]


def parse(args: list[str]) -> tuple[list[str], list[tuple[int, int, int]], list[str]]:
    """(cgroup.procs files, rlimits, the command) of confine.py's arguments; ValueError
    when they are not confine_argv's."""
    procs: list[str] = []
    rlimits: list[tuple[int, int, int]] = []
    i = 0
    while i < len(args) and args[i] != "--":
        if i + 1 >= len(args) or args[i] not in ("--join", "--rlimit"):
            raise ValueError(f"unexpected argument {args[i]!r}")
        if args[i] == "--join":
            procs.append(args[i + 1])
        else:
            res, soft, hard = (int(n) for n in args[i + 1].split(":"))
            rlimits.append((res, soft, hard))
        i += 2
    if i + 1 >= len(args):
        raise ValueError("no command after --")
    return procs, rlimits, args[i + 1 :]


def _set_rlimit(res: int, soft: int, hard: int) -> None:
    """Set (soft, hard). Where this process may not raise the hard limit that far (not
    root), the current hard limit stays and the soft one goes as near as it allows."""
    try:
        resource.setrlimit(res, (soft, hard))
    except (ValueError, OSError):
        _, cur_hard = resource.getrlimit(res)  # finite: an infinite one could be kept
        resource.setrlimit(res, (min(soft, cur_hard), cur_hard))


def main(args: list[str]) -> int:
    try:
        procs, limits, argv = parse(args)
    except ValueError as e:
        print(f"{PREFIX}usage: confine.py [--join P]... [--rlimit R:SOFT:HARD]... -- ARGV ({e})", file=sys.stderr)
        return FAILED
    pid = str(os.getpid()).encode()
    try:
        for path in procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)
    except OSError as e:
        print(f"{PREFIX}cannot join the cell's cgroup ({e.filename}: {e.strerror})", file=sys.stderr)
        return FAILED
    try:
        for res, soft, hard in limits:
            _set_rlimit(res, soft, hard)
    except (ValueError, OSError) as e:
        print(f"{PREFIX}cannot set rlimits ({e})", file=sys.stderr)
        return FAILED
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        print(f"{PREFIX}cannot execute {argv[0]} ({e.strerror})", file=sys.stderr)
        return 127
    return FAILED  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
