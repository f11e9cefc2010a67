"""Glue between a Snakemake job and the stage functions: logging, errors as one line, and
the stage's state record.

A HarnessError ends the job with one line in its log (and on stderr), not a traceback;
anything unexpected keeps its traceback, in the log.

`<cell>/<stage>.state.json` says the stage is running (host, pid, scheduler job), done,
or failed and why. It is not a Snakemake output, so it survives the failed job that
wrote it; a `running` state whose process is gone means the job died unrecorded (node
failure, SIGKILL, walltime), which `ptb_harness.results.outcome` reports as such.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.reader import campaign_from_config
from ptb_harness.core.cell_files import lock_file, state_file
from ptb_harness.core.errors import HarnessError, Interrupted
from ptb_harness.core.records import atomic_write_json, read_json_dict
from ptb_harness.core.text import TerminalLogFormatter, terminal_line
from ptb_harness.runtime.procs import iso_utc, process_start_ticks
from ptb_harness.runtime.scheduler import scheduler_job

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _write_state(path: Path | None, state: dict[str, Any]) -> None:
    if path is not None:
        with contextlib.suppress(OSError):  # a record of the state must not fail the stage
            atomic_write_json(path, state)


@contextlib.contextmanager
def stage(log_path: str | Path, name: str, cell_dir: str | Path | None = None) -> Iterator[logging.Logger]:
    log_path = Path(log_path)
    state_path = Path(cell_dir) / state_file(name) if cell_dir is not None else None
    state: dict[str, Any] = {
        "stage": name,
        "state": "running",
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_start_ticks": process_start_ticks(os.getpid()),
        "started_at": iso_utc(time.time()),
        "scheduler": scheduler_job(os.environ),
        "log": str(log_path),
    }
    lock = None
    if state_path is not None:
        state_path.parent.mkdir(parents=True, exist_ok=True)
        # one process per cell and stage: an orphan of a killed Snakemake that still runs
        # must not be joined by a rerun writing the same files (the kernel drops the lock
        # however the holder ends)
        lock = open(state_path.with_name(lock_file(name)), "a")  # noqa: SIM115 - held for the stage
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            other = read_json_dict(state_path) or {}
            msg = (
                f"{name} failed: another {name} of this cell is running "
                f"(pid {other.get('pid', '?')} on {other.get('host', '?')} since {other.get('started_at', '?')}); "
                "wait for it, or stop it, then rerun"
            )
            print(terminal_line(msg), file=sys.stderr)
            raise SystemExit(1) from None
    _write_state(state_path, state)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger("ptb_harness")
    root.setLevel(logging.INFO)
    handlers = [logging.FileHandler(log_path), logging.StreamHandler(sys.stderr)]
    for h in handlers:
        # one line per record: a file name, a scorer line or an error an agent wrote never
        # forges a log line or reaches the terminal (Snakemake shows these logs) as ESC bytes
        h.setFormatter(TerminalLogFormatter(_FORMAT, "%Y-%m-%dT%H:%M:%S"))
        root.addHandler(h)
    logger = logging.getLogger(f"ptb_harness.{name}")
    try:
        yield logger
        _write_state(state_path, {**state, "state": "done", "ended_at": iso_utc(time.time())})
    except Interrupted as e:
        # stopped from outside (Ctrl-C, SIGTERM): a record, so it never reads as a node failure
        logger.error("%s interrupted by signal %d", name, e.signum)
        _write_state(
            state_path, {**state, "state": "interrupted", "signal": e.signum, "ended_at": iso_utc(time.time())}
        )
        raise
    except HarnessError as e:
        logger.error("%s failed: %s", name, e)
        _write_state(state_path, {**state, "state": "failed", "reason": str(e), "ended_at": iso_utc(time.time())})
        raise SystemExit(1) from None
    except Exception as e:
        logger.exception("%s failed with an unexpected error (a harness bug)", name)
        reason = f"harness bug: {type(e).__name__}: {e}"
        _write_state(state_path, {**state, "state": "failed", "reason": reason, "ended_at": iso_utc(time.time())})
        raise SystemExit(1) from None
    finally:
        for h in handlers:
            root.removeHandler(h)
            h.close()
        if lock is not None:
            lock.close()


def from_snakemake(smk: Any) -> tuple[Campaign, Cell]:
    """The campaign (config already validated by the Snakefile) and the job's cell."""
    return campaign_from_config(smk.config, Path.cwd()), Cell.from_wildcards(smk.wildcards)
