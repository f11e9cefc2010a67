"""Exceptions that end a command with one line naming what is wrong."""


class HarnessError(Exception):
    """The harness (or the infrastructure under it) could not do its part for a cell."""


class ConfigError(HarnessError):
    """A configuration or input file is invalid; the message names the key or file."""
