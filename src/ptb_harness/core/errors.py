"""Exceptions that end a command with one line naming what is wrong."""


class HarnessError(Exception):
    """The harness (or the infrastructure under it) could not do its part for a cell."""


class ConfigError(HarnessError):
    """A configuration or input file is invalid; the message names the key or file."""


class Interrupted(SystemExit):
    """The stage was stopped by a signal (Ctrl-C, SIGTERM from the workflow manager or the
    scheduler) after its child was stopped: recorded as `interrupted`, and a rerun redoes it.
    Exits like the signal would (128 + its number)."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum
