"""The job wrapper every rule's script runs in (workflow/scripts/): a lock per cell and
stage, the stage's state record, logging, and errors mapped to one line and an exit code.

A HarnessError ends the job with one line in its log (and on stderr), not a traceback;
anything unexpected keeps its traceback, in the log. Either way the job exits 1.

`<cell>/<stage>.state.json` says the stage is running (host, pid, scheduler job), done,
or failed and why. It is not a Snakemake output, so it survives the failed job that
wrote it; a `running` state whose process is gone means the job died unrecorded (node
failure, SIGKILL, walltime), which `ptb_harness.results.outcome` reports as such.

This is Snakemake glue, so it sits on top of the package: the stages below know nothing
of jobs, locks or exit codes.
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
from typing import IO, Any

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


def _running_state(name: str, log_path: Path) -> dict[str, Any]:
    """The state record of a stage that has just started in this process."""
    return {
        "stage": name,
        "state": "running",
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_start_ticks": process_start_ticks(os.getpid()),
        "started_at": iso_utc(time.time()),
        "scheduler": scheduler_job(os.environ),
        "log": str(log_path),
    }


def _lock_stage(state_path: Path, name: str) -> IO[str]:
    """The cell's lock for this stage, held until closed; exits 1 with one line naming the
    holder when another process holds it.

    One process per cell and stage: an orphan of a killed Snakemake that still runs must
    not be joined by a rerun writing the same files (the kernel drops the lock however
    the holder ends)."""
    state_path.parent.mkdir(parents=True, exist_ok=True)
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
    return lock


@contextlib.contextmanager
def _logging_to(log_path: Path) -> Iterator[None]:
    """The package's log records go to the job's log file and to stderr while in the block."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger("ptb_harness")
    root.setLevel(logging.INFO)
    handlers = [logging.FileHandler(log_path), logging.StreamHandler(sys.stderr)]
    for h in handlers:
        # one line per record: a file name, a scorer line or an error an agent wrote never
        # forges a log line or reaches the terminal (Snakemake shows these logs) as ESC bytes
        h.setFormatter(TerminalLogFormatter(_FORMAT, "%Y-%m-%dT%H:%M:%S"))
        root.addHandler(h)
    try:
        yield
    finally:
        for h in handlers:
            root.removeHandler(h)
            h.close()


@contextlib.contextmanager
def _recorded(name: str, state: dict[str, Any], state_path: Path | None, logger: logging.Logger) -> Iterator[None]:
    """How the block ended, in the state record and as the job's exit: done; interrupted
    (the signal re-raised); a HarnessError or anything unexpected, failed with exit 1."""

    def ended(**fields: Any) -> None:
        _write_state(state_path, {**state, **fields, "ended_at": iso_utc(time.time())})

    try:
        yield
        ended(state="done")
    except Interrupted as e:
        # stopped from outside (Ctrl-C, SIGTERM): a record, so it never reads as a node failure
        logger.error("%s interrupted by signal %d", name, e.signum)
        ended(state="interrupted", signal=e.signum)
        raise
    except HarnessError as e:
        logger.error("%s failed: %s", name, e)
        ended(state="failed", reason=str(e))
        raise SystemExit(1) from None
    except Exception as e:
        logger.exception("%s failed with an unexpected error (a harness bug)", name)
        ended(state="failed", reason=f"harness bug: {type(e).__name__}: {e}")
        raise SystemExit(1) from None


@contextlib.contextmanager
def stage(log_path: str | Path, name: str, cell_dir: str | Path | None = None) -> Iterator[logging.Logger]:
    """Run the block as the job of stage ``name``: logged to log_path, and, with a cell
    dir, under the cell's lock for the stage with its state record beside the cell's files."""
    log_path = Path(log_path)
    state_path = Path(cell_dir) / state_file(name) if cell_dir is not None else None
    state = _running_state(name, log_path)
    lock = _lock_stage(state_path, name) if state_path is not None else None
    try:
        _write_state(state_path, state)
        logger = logging.getLogger(f"ptb_harness.{name}")
        with _logging_to(log_path), _recorded(name, state, state_path, logger):
            yield logger
    finally:
        if lock is not None:
            lock.close()


def from_snakemake(smk: Any) -> tuple[Campaign, Cell]:
    """The campaign (config already validated by the Snakefile) and the job's cell."""
    return campaign_from_config(smk.config, Path.cwd()), Cell.from_wildcards(smk.wildcards)
