"""Agent traces: the format declared by the agent or detected from the content, a
readable transcript, sanitized companions, in one streaming pass of constant memory.

Public API: ``parse_trace_file`` and ``TraceStats`` (imported when first asked for:
loading a campaign reads ``detect.DECLARABLE`` and needs none of the parser).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ptb_harness.traces.parse import TraceStats, parse_trace_file

__all__ = ["TraceStats", "parse_trace_file"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ptb_harness.traces import parse

        return getattr(parse, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
