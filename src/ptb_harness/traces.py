"""Raw agent trace -> human-readable transcript.

For now a streaming verbatim copy (constant memory, bytes in, bytes out); content-based
format detection and parsing plug in here.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def parse_trace_file(raw: Path, parsed: Path) -> None:
    parsed.parent.mkdir(parents=True, exist_ok=True)
    tmp = parsed.with_name(f".{parsed.name}.tmp")
    with open(raw, "rb") as src, open(tmp, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    tmp.replace(parsed)
