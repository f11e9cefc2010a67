"""Glue between a Snakemake job and the stage functions: logging, and errors as one line.

A HarnessError ends the job with one line in its log (and on stderr), not a traceback;
anything unexpected keeps its traceback, in the log.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ptb_harness.campaign import Campaign, Cell
from ptb_harness.errors import HarnessError

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextlib.contextmanager
def stage(log_path: str | Path, name: str) -> Iterator[logging.Logger]:
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger("ptb_harness")
    root.setLevel(logging.INFO)
    handlers = [logging.FileHandler(log_path), logging.StreamHandler(sys.stderr)]
    for h in handlers:
        h.setFormatter(logging.Formatter(_FORMAT, "%Y-%m-%dT%H:%M:%S"))
        root.addHandler(h)
    logger = logging.getLogger(f"ptb_harness.{name}")
    try:
        yield logger
    except HarnessError as e:
        logger.error("%s failed: %s", name, e)
        raise SystemExit(1) from None
    except Exception:
        logger.exception("%s failed with an unexpected error (a harness bug)", name)
        raise SystemExit(1) from None
    finally:
        for h in handlers:
            root.removeHandler(h)
            h.close()


def from_snakemake(smk: Any) -> tuple[Campaign, Cell]:
    """The campaign (config already validated by the Snakefile) and the job's cell."""
    campaign = Campaign(config=smk.config, workdir=Path.cwd())
    return campaign, Cell.from_wildcards(smk.wildcards)
