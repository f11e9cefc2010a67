"""Secret values as byte patterns to look for: the literal value and its base64 forms.

One list serves the trace sanitizer (redaction) and the delivery of final_model (a hit
withholds the model), so both know the same secrets in the same shapes.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping

#: Shorter values are not treated as secrets (redacting them would blank ordinary text).
MIN_SECRET_LEN = 8
#: Values that are placeholders, not secrets.
_PLACEHOLDER = re.compile(r"^(x+|\*+|<[^>]*>|your[-_ ].*|changeme|placeholder.*|dummy.*|none|null|true|false)$", re.I)


def base64_forms(value: bytes) -> list[bytes]:
    """The part of base64(anything + value + anything) that depends on value alone, for
    each of the three alignments, in the standard and the URL-safe alphabet: a secret
    encoded anywhere in a longer base64 text contains one of them."""
    forms = []
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + value)
        # output char i covers input bits 6i..6i+5: keep the chars covering value's bytes only
        start = -(-8 * k // 6)
        end = (8 * (k + len(value)) - 6) // 6
        part = enc[start : end + 1]
        forms.append(part)
        urlsafe = part.replace(b"+", b"-").replace(b"/", b"_")
        if urlsafe != part:
            forms.append(urlsafe)
    return forms


def secret_needles(secrets: Mapping[str, str]) -> list[tuple[bytes, str]]:
    """(bytes to look for, the variable's name and form), longest first, for every value
    that counts as a secret."""
    out: list[tuple[bytes, str]] = []
    for name, value in secrets.items():
        if not isinstance(value, str) or len(value) < MIN_SECRET_LEN or _PLACEHOLDER.match(value):
            continue
        raw = value.encode()
        out.append((raw, name))
        out += [(form, f"{name}:base64") for form in base64_forms(raw) if len(form) >= MIN_SECRET_LEN]
    return sorted(out, key=lambda p: -len(p[0]))
