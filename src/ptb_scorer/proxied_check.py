"""HumanEval's check with the model's code apart from the tests (PostTrainBench v1.2's design).

inspect_evals runs prompt + answer + test + ``check(entry_point)`` as one program and
passes a sample whose program exits 0, so an answer that exits early, fakes the exit
status or returns an object equal to everything passes. Here two contained processes
(:mod:`ptb_scorer.contained`) run the programs of :mod:`ptb_scorer.proxy_runtime`:

- the **checker** holds the prompt and the test and runs ``check()`` against a proxy; it
  keeps the scorer's uid (the answer's dropped uid cannot touch it), is non-dumpable, and
  gets its request on stdin, in a directory only the scorer can read;
- the **answer** process runs prompt + answer (as ``__main__``) as uid 65534, in its own
  network and PID namespaces, and answers the proxy's calls over two pipes, one fresh
  process per sample (as upstream's answer sandbox: one process per connection, i.e. per
  sample). It sees the arguments of each call, never the test or the expected values.

Where the answer cannot get another uid (an unprivileged scorer), the scorer makes itself
non-dumpable too, so the answer still cannot reach the checker's or the scorer's memory
or pipes; it can still signal them (a failed attempt, never a forged score).

The sample passes only when the checker exited 0 and wrote exactly one verdict line,
``PTB_CHECK_DONE <calls>`` with at least one call, before the sample's deadline. The
answer cannot write that line (it has no handle on the checker's verdict pipe, and a
second line fails the sample), and nothing it returns is more than a plain value.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ptb_scorer.contained import Limits, Pump, kill_group, split_applied, start, work_dir, work_root
from ptb_scorer.proxy_runtime import DONE, HARNESS, HARNESS_EXIT

RUNTIME = (Path(__file__).parent / "proxy_runtime.py").read_text()


class HarnessFailure(RuntimeError):
    """The check itself failed (never the answer's doing): the sample cannot be scored."""


@dataclass
class CheckResult:
    passed: bool
    #: "passed", "failed", "timeout", "no verdict", "answer never called"
    reason: str
    calls: int
    explanation: str
    duration_s: float
    #: what containment applied to the answer process
    applied: list[str] = field(default_factory=list)


def _checker_limits(limits: Limits) -> Limits:
    """The checker runs only the dataset's code and plain values: the scorer's uid, so
    the answer (another uid) can neither signal nor trace it."""
    return Limits(**{**limits.__dict__, "drop_to": None})


def _verdict(exit_code: int | None, verdict: str) -> tuple[bool, str, int]:
    """(passed, reason, calls) from the checker's exit status and its verdict channel."""
    lines = verdict.splitlines()
    if exit_code == HARNESS_EXIT and len(lines) == 1 and lines[0].startswith(HARNESS + " "):
        raise HarnessFailure(lines[0].removeprefix(HARNESS + " "))
    if exit_code != 0:
        return False, "failed", 0
    parts = lines[0].split() if len(lines) == 1 else []
    if len(parts) != 2 or parts[0] != DONE or not parts[1].isdigit():
        return False, "no verdict", 0
    calls = int(parts[1])
    return (True, "passed", calls) if calls > 0 else (False, "answer never called", 0)


def _launch(root: str, prompt: str, answer: str, entry_point: str, limits: Limits) -> list[subprocess.Popen]:
    """The answer process and the checker, joined by two pipes that only they hold."""
    answer_dir, checker_dir = work_dir(root, "answer", shared=True), work_dir(root, "checker", shared=False)
    code_path = os.path.join(answer_dir, "answer.py")
    Path(code_path).write_text(prompt + answer, encoding="utf-8")
    os.chmod(code_path, 0o644)
    to_answer_r, to_answer_w = os.pipe()
    to_checker_r, to_checker_w = os.pipe()
    procs: list[subprocess.Popen] = []
    try:
        ends = (to_answer_r, to_checker_w)
        args = ["answer", str(to_answer_r), str(to_checker_w), entry_point, code_path]
        procs.append(start(RUNTIME, args, limits, answer_dir, stderr=subprocess.STDOUT, pass_fds=ends))
        ends = (to_answer_w, to_checker_r)
        args = ["checker", str(to_answer_w), str(to_checker_r)]
        procs.append(start(RUNTIME, args, _checker_limits(limits), checker_dir, stdin=subprocess.PIPE, pass_fds=ends))
    except BaseException:
        _stop(procs)
        raise
    finally:
        for fd in (to_answer_r, to_answer_w, to_checker_r, to_checker_w):
            os.close(fd)
    return procs


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        kill_group(p)
        p.wait()
        for f in (p.stdin, p.stdout, p.stderr):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()


def harden_scorer() -> None:
    """Make the scorer's own process non-dumpable: where the answer cannot get another uid
    (an unprivileged scorer, e.g. in bwrap's capability-less user namespace), a process of
    the same uid can then neither trace it nor open its memory or its pipes through /proc."""
    import ctypes

    PR_SET_DUMPABLE = 4
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def check(prompt: str, answer: str, test: str, entry_point: str, limits: Limits | None = None) -> CheckResult:
    """Run HumanEval's ``check(entry_point)`` on prompt + answer, proxied, under one
    deadline of ``limits.timeout_s`` for the whole sample. Raises HarnessFailure when the
    test passed a value the proxy cannot send."""
    limits = limits or Limits()
    harden_scorer()
    t0 = time.monotonic()
    deadline = t0 + limits.timeout_s
    root = work_root(limits)  # one per sample: the answer's dir and the checker's, beside it
    pump = Pump(head=4096, tail=8192)
    procs: list[subprocess.Popen] = []
    try:
        procs = _launch(root, prompt, answer, entry_point, limits)
        ans, chk = procs
        pump.write(chk.stdin, json.dumps({"prompt": prompt, "test": test, "entry_point": entry_point}).encode())  # type: ignore[arg-type]
        verdict, checker_err, answer_out = (pump.read(f) for f in (chk.stdout, chk.stderr, ans.stdout))  # type: ignore[arg-type]
        if pump.run(deadline, until={verdict, checker_err}):
            with contextlib.suppress(subprocess.TimeoutExpired):
                chk.wait(timeout=max(0.05, deadline - time.monotonic()))
        timed_out = chk.returncode is None or time.monotonic() > deadline
        kill_group(ans)
        kill_group(chk)
        pump.run(time.monotonic() + 1.0, until={answer_out})  # what the answer printed last
        passed, reason, calls = (False, "timeout", 0) if timed_out else _verdict(chk.returncode, pump.text(verdict))
        applied, answer_text = split_applied(pump.text(answer_out))
        _, checker_text = split_applied(pump.text(checker_err))
        explanation = "" if passed else f"{reason}\n--- checker:\n{checker_text[-3000:]}\n--- answer:\n"
        explanation += "" if passed else answer_text[-1000:]
        return CheckResult(passed, reason, calls, explanation, round(time.monotonic() - t0, 3), applied)
    finally:
        _stop(procs)
        pump.close()
        shutil.rmtree(root, ignore_errors=True)
