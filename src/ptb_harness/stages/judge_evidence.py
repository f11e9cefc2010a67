"""The judge's reads of what the agent did: its sanitized transcript and its gateway's
request log, streamed line by line, bounded, never following a link. What cannot be read
whole (a line over its bound, a file over its size, a log the solve says exists but
does not) is named in ``Actions.failures``: the lookups' signals fail closed."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from ptb_harness.core.records import json_too_deep
from ptb_harness.judging.evidence_signals import Actions
from ptb_harness.judging.lookups import cut_body_hits, llm_log_calls, trace_calls

#: the longest line read (the gateway cuts bodies at llm_log_max_body_kb, 64 KiB by default)
MAX_LINE = 64 << 20
#: the most of a log or transcript read
MAX_FILE = 8 << 30


def _lines(path: Path, failures: list[str], digest: hashlib._Hash | None = None) -> Iterator[bytes]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        failures.append(f"{path.name}: cannot open ({e.strerror})")
        return
    read = 0
    with os.fdopen(fd, "rb") as f:
        while line := f.readline(MAX_LINE + 1):
            read += len(line)
            if digest is not None:
                digest.update(line)
            if len(line) > MAX_LINE or read > MAX_FILE:
                failures.append(f"{path.name}: a line over {MAX_LINE} bytes, or over {MAX_FILE} bytes in all")
                return
            yield line


def read_actions(transcript: Path, llm_log: Path, expect_log: bool) -> Actions:
    """The agent's tool calls in its transcript and (when its solve ran a gateway) its
    gateway's log, as lookups' hits."""
    actions = Actions()
    text = (line.decode("utf-8", "replace").rstrip("\n") for line in _lines(transcript, actions.failures))
    actions.add(trace_calls(text), "trace")
    if not llm_log.exists() and not llm_log.is_symlink():
        if expect_log:
            actions.failures.append(f"{llm_log.name} is missing, though the solve ran the agent's gateway")
        return actions
    digest = hashlib.sha256()
    for n, line in enumerate(_lines(llm_log, actions.failures, digest), 1):
        try:
            entry = json.loads(line)
        except ValueError:
            actions.failures.append(f"{llm_log.name} line {n} is not JSON")
            continue
        if not isinstance(entry, dict) or json_too_deep(entry):
            actions.failures.append(f"{llm_log.name} line {n} is not a record")
            continue
        calls, cut = llm_log_calls(entry)
        actions.add(calls, "llm_log")
        actions.add_hits(cut_body_hits(cut), [])
    actions.log_sha256 = digest.hexdigest()
    return actions
