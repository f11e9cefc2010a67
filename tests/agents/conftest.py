"""Fixtures of the agent tests: the pinned CLIs (skip with a reason when not installed)
and the scripted model server (a test stand-in, see scripted_server.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))  # scripted_server and protocols/ import each other by name

from ptb_harness.runtime.agent_cli import bin_dir, is_installed  # noqa: E402

#: Where `ptb-harness setup-agents` puts the CLIs by default (.ci/run runs it).
CLI_PREFIX = REPO / "resources" / "agent-cli"
CLI_LOCK = REPO / "agents" / "cli"


def cli_bin(name: str) -> Path:
    """The pinned CLI's executable, or skip the test saying how to install it."""
    exe = bin_dir(CLI_PREFIX) / name
    if not is_installed(CLI_LOCK, CLI_PREFIX) or not exe.exists():
        pytest.skip(f"agent CLIs not installed in {CLI_PREFIX}: run `ptb-harness setup-agents` (CI does)")
    return exe
