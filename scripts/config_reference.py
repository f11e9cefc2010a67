"""Write docs/configuration.md from config/config.schema.yaml (ptb_harness.core.schema_docs).

.venv/bin/python scripts/config_reference.py          # rewrite it
.venv/bin/python scripts/config_reference.py --check  # exit 1 if it is not current
"""

from __future__ import annotations

import sys
from pathlib import Path

from ptb_harness.core.schema import load_schema
from ptb_harness.core.schema_docs import reference_markdown

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def main() -> int:
    text = reference_markdown(load_schema())
    if "--check" in sys.argv[1:]:
        current = REFERENCE.is_file() and REFERENCE.read_text(encoding="utf-8") == text
        if not current:
            print(f"{REFERENCE}: not current; run python scripts/config_reference.py", file=sys.stderr)
        return 0 if current else 1
    REFERENCE.write_text(text, encoding="utf-8")
    print(f"wrote {REFERENCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
