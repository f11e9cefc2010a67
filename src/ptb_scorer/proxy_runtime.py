"""The two programs of a proxied HumanEval check, run as contained processes (standard
library only, ``python -I -S``; :mod:`ptb_scorer.proxied_check` starts them).

- ``checker``: runs the sample's prompt (its helpers, e.g. HumanEval/32's ``poly``), its
  test and ``check(candidate)``, where ``candidate`` (and the entry point's name) is a
  proxy. It reads its request (prompt, test, entry point) from stdin, so the tests are in
  no file and on no command line, and makes itself non-dumpable first, so a process of
  the same uid can neither trace it nor open its memory or its pipes through /proc. It
  writes exactly one verdict line on a channel of its own (the test's prints go to
  stderr): ``PTB_CHECK_DONE <calls>`` once check() has returned, ``PTB_CHECK_HARNESS
  why`` when the harness, not the answer, failed (a test argument that cannot be sent).
- ``answer``: runs prompt + the model's answer as ``__main__`` (as inspect_evals' single
  program did), then serves the checker's calls of the entry point, one message each.

Only text crosses from the answer to the checker: each result as ``repr()``, which the
checker parses with :func:`plain_eval` (literals of built-in types only), so no object of
the answer's (an always-equal one, a patched ``__eq__``) and none of its code ever reach
the test. Messages: a 4-byte big-endian length, then UTF-8 JSON.
"""

from __future__ import annotations

import ast
import builtins
import json
import math
import os
import sys
import traceback
from typing import Any

#: The largest message either side reads (a result's repr, a traceback).
MAX_MESSAGE_BYTES = 16 << 20
DONE = "PTB_CHECK_DONE"
HARNESS = "PTB_CHECK_HARNESS"
#: The checker's exit status when the harness failed (never the answer's doing).
HARNESS_EXIT = 3


class AnswerError(Exception):
    """The answer failed, exited, or broke the protocol: the sample fails."""


def send(fd: int, message: dict[str, Any]) -> None:
    body = json.dumps(message).encode("utf-8")
    if len(body) > MAX_MESSAGE_BYTES:
        raise AnswerError(f"message of {len(body)} bytes exceeds {MAX_MESSAGE_BYTES}")
    data = len(body).to_bytes(4, "big") + body
    while data:
        data = data[os.write(fd, data) :]


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            if got == 0:
                return None
            raise AnswerError(f"channel closed after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv(fd: int) -> dict[str, Any] | None:
    """The next message, or None when the other side closed the channel."""
    header = _read_exactly(fd, 4)
    if header is None:
        return None
    length = int.from_bytes(header, "big")
    if length > MAX_MESSAGE_BYTES:
        raise AnswerError(f"message of {length} bytes exceeds {MAX_MESSAGE_BYTES}")
    body = _read_exactly(fd, length)
    if body is None:
        raise AnswerError("channel closed before the message body")
    try:
        message = json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise AnswerError(f"malformed message: {e}") from None
    if not isinstance(message, dict):
        raise AnswerError("malformed message: not an object")
    return message


_NAMES = {"inf": math.inf, "nan": math.nan, "True": True, "False": False, "None": None}
_CONTAINERS = {ast.Tuple: tuple, ast.List: list, ast.Set: set}


def _node(n: ast.AST) -> Any:
    """The value of one node of a repr() of built-in values; ValueError for anything else."""
    if isinstance(n, ast.Constant) and type(n.value) in (int, float, complex, str, bytes, bool, type(None)):
        return n.value
    if isinstance(n, ast.Name) and n.id in _NAMES:  # repr(float('inf')) is 'inf'
        return _NAMES[n.id]
    if type(n) in _CONTAINERS:
        return _CONTAINERS[type(n)](_node(e) for e in n.elts)  # type: ignore[attr-defined]
    if isinstance(n, ast.Dict) and None not in n.keys:
        return {_node(k): _node(v) for k, v in zip(n.keys, n.values, strict=True)}  # type: ignore[arg-type]
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
        v = _node(n.operand)
        if type(v) in (int, float, complex):
            return -v if isinstance(n.op, ast.USub) else v
    return _compound(n)


def _compound(n: ast.AST) -> Any:
    """complex numbers (``(1+2j)``), ``set()`` and ``frozenset({...})``."""
    if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub)):
        a, b = _node(n.left), _node(n.right)
        if type(a) in (int, float) and type(b) is complex:
            return a + b if isinstance(n.op, ast.Add) else a - b
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords and len(n.args) <= 1:
        kind = {"set": set, "frozenset": frozenset}.get(n.func.id)
        if kind is not None:
            return kind(_node(n.args[0])) if n.args else kind()
    raise ValueError(f"not a plain value: {type(n).__name__}")


def plain_eval(text: str) -> Any:
    """A value of built-in types (numbers, str, bytes, bool, None, tuple, list, dict, set,
    frozenset, inf and nan included) from its repr(); ValueError for anything else."""
    try:
        tree = ast.parse(text, mode="eval")
        return _node(tree.body)
    except (SyntaxError, RecursionError, MemoryError, TypeError) as e:
        raise ValueError(f"not a plain value: {type(e).__name__}") from None


def plain(value: Any) -> Any:
    """value as built-in types (a namedtuple, an IntEnum, a str subclass compare equal to
    theirs), so that its repr() parses; anything else is left to fail in the checker."""
    if value is None or type(value) in (bool, int, float, complex, str, bytes):
        return value
    for base in (bool, int, float, complex, str, bytes):
        if isinstance(value, base):
            return base(value)
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, frozenset):
        return frozenset(plain(v) for v in value)
    if isinstance(value, set):
        return {plain(v) for v in value}
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return value


# -- the answer's side -----------------------------------------------------------------------
def answer_main(rfd: int, wfd: int, entry_point: str, code_path: str) -> None:
    with open(code_path, encoding="utf-8") as f:
        code = f.read()
    for fd in (rfd, wfd):
        os.set_inheritable(fd, False)
    # like inspect_evals' `python -c prompt+answer+test`: the answer runs as __main__
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compile(code, "<answer>", "exec"), namespace)
        function = namespace[entry_point]
    except BaseException:
        send(wfd, {"load_error": traceback.format_exc()[-8000:]})
        return
    send(wfd, {"loaded": True})
    while (message := recv(rfd)) is not None:
        try:
            result = function(*plain_eval(message["args"]), **plain_eval(message["kwargs"]))
            reply = {"value": repr(plain(result))}
        except BaseException:
            reply = {"raised": traceback.format_exc()[-8000:]}
        send(wfd, reply)


# -- the checker's side ----------------------------------------------------------------------
def _harness_failure(verdict: Any, why: str) -> None:
    verdict.write(f"{HARNESS} {why[:500]}\n")
    verdict.flush()
    os._exit(HARNESS_EXIT)


class Candidate:
    """Stands in for the model's function in check(candidate): every call is answered by
    the answer process, and only a plain value comes back."""

    def __init__(self, wfd: int, rfd: int, verdict: Any) -> None:
        self._wfd, self._rfd, self._verdict = wfd, rfd, verdict
        self.calls = 0
        reply = recv(rfd)
        if reply is None:
            raise AnswerError("the answer process exited while loading")
        if "load_error" in reply:
            raise AnswerError(f"loading the answer failed:\n{str(reply['load_error'])[-4000:]}")
        if reply != {"loaded": True}:
            raise AnswerError(f"unexpected first message: {str(reply)[:200]}")

    def _encode(self, value: Any) -> str:
        text = repr(value)
        try:
            back = plain_eval(text)
        except ValueError:
            back = None
        if type(back) is not type(value) or (back != value and text != repr(back)):
            _harness_failure(self._verdict, f"the test passed a value that cannot be sent: {text[:200]}")
        return text

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        send(self._wfd, {"args": self._encode(args), "kwargs": self._encode(kwargs)})
        reply = recv(self._rfd)
        if reply is None:
            raise AnswerError("the answer process exited during the call")
        if set(reply) == {"raised"}:
            raise AnswerError(f"the answer raised:\n{str(reply['raised'])[-4000:]}")
        if set(reply) != {"value"} or not isinstance(reply["value"], str):
            raise AnswerError(f"unexpected reply: {str(reply)[:200]}")
        try:
            return plain_eval(reply["value"])
        except ValueError as e:
            raise AnswerError(f"the answer returned no plain value ({e}): {reply['value'][:200]}") from None


def _run(source: str, name: str, namespace: dict[str, Any]) -> None:
    """exec source as file `name`, its lines kept for tracebacks (the failing assert shows)."""
    import linecache

    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    exec(compile(source, name, "exec"), namespace)


def _nondumpable() -> None:
    import ctypes

    PR_SET_DUMPABLE = 4
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def checker_main(wfd: int, rfd: int) -> None:
    _nondumpable()  # before anything is read: the tests never sit in a traceable process
    request = json.loads(sys.stdin.read())
    verdict = os.fdopen(os.dup(1), "w")  # the verdict's own channel ...
    os.dup2(2, 1)  # ... the test's prints go to stderr
    for fd in (wfd, rfd, verdict.fileno()):
        os.set_inheritable(fd, False)
    candidate = Candidate(wfd, rfd, verdict)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    _run(request["prompt"], "<prompt>", namespace)
    namespace[request["entry_point"]] = candidate  # some tests call it by name
    _run(request["test"], "<test>", namespace)
    namespace["check"](candidate)
    verdict.write(f"{DONE} {candidate.calls}\n")
    verdict.flush()


def main(argv: list[str]) -> None:
    sys.set_int_max_str_digits(0)  # results are bounded in size instead
    if argv[0] == "answer":
        answer_main(int(argv[1]), int(argv[2]), argv[3], argv[4])
    elif argv[0] == "checker":
        checker_main(int(argv[1]), int(argv[2]))
    else:
        raise SystemExit(f"unknown role {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
