r"""Control characters shown as escapes (``\x1b``, ``\u202e``): output shows input, never obeys it.

One rule for every door that writes input-derived text: the terminal (``cli.display``) and
CI's files (``batch.ci``: JUnit XML, the step summary, annotations). Newline, tab and every
other character, ASCII or not, are returned unchanged.
"""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, C1 controls, bidi embeddings/overrides and
# isolates, and lone surrogates (no encoding can write them)
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_SHOWN = re.compile(f"[{_CONTROLS}]")
_SHOWN_IN_XML = re.compile(f"[{_CONTROLS}\ufffe\uffff]")  # XML 1.0 holds neither


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escaped(text: str, *, xml: bool = False) -> str:
    """``text`` with its control characters (and, for ``xml``, U+FFFE and U+FFFF) as escapes."""
    return (_SHOWN_IN_XML if xml else _SHOWN).sub(_visible, text)
