"""Safe terminal output: text from a response or a model is shown, never obeyed, by the terminal.

A response or a model's reason can hold escape sequences (colours, cursor moves, window
titles), BEL, a carriage return that overwrites what came before, or bidi controls that make
text read differently from what it is. ``printable`` turns those into visible escapes.
"""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, C1 controls, bidi embeddings/overrides and isolates
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    r"""Show control characters as escapes (``\x1b``, ``\u202e``): the terminal cannot act on them.

    Newline, tab and every other character, ASCII or not, are returned unchanged.
    """
    return _CONTROLS.sub(_visible, text)
