"""Agent traces: detect the format from the content, render a readable transcript,
write sanitized companions, in one streaming pass of constant memory.

Public API: ``parse_trace_file`` and ``TraceStats``.
"""

from ptb_harness.traces.parse import TraceStats, parse_trace_file

__all__ = ["TraceStats", "parse_trace_file"]
