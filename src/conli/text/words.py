r"""Words of any script: the one tokenizer behind every word-level signal and sentence test.

Python's ``\w`` is Unicode-aware, so "eröffnet" or "Straße" stays one word. Chinese and
Japanese put no spaces between words, so each ideograph or kana is a word of its own (the
usual character-level unit for overlap in those scripts). On ASCII text every pattern here
matches exactly what the English-only patterns it replaced did.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# CJK ideographs (with extensions and compatibility forms), 々, 〇, hiragana and katakana
_IDEOGRAPHS = ("\u3005\u3007\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
               "\U00020000-\U0003134f")
_LETTERS = rf"[^\W_{_IDEOGRAPHS}]+"  # letters and digits of any script written with spaces
_ALONE = rf"[{_IDEOGRAPHS}]"
_TERM = re.compile(rf"{_ALONE}|{_LETTERS}(?:[.,]\d+)*")  # "2.4" and "1,000" stay one word
_WRITTEN = re.compile(rf"{_ALONE}|{_LETTERS}(?:[.,'’]{_LETTERS})*")  # and "don't", "U.S"
_RUN = re.compile(rf"{_ALONE}|[^\W{_IDEOGRAPHS}]+")  # ``\w+``, ideographs one by one


def terms(text: str) -> list[str]:
    """The words of ``text`` for overlap: numbers keep their decimal and thousands marks."""
    return _TERM.findall(text)


def written_words(text: str) -> Iterator[re.Match[str]]:
    """The words of ``text`` as a reader sees them (apostrophes and "U.S" kept), with offsets."""
    return _WRITTEN.finditer(text)


def word_count(text: str) -> int:
    r"""How many words ``text`` has (runs of ``\w``; each ideograph counts as one)."""
    return len(_RUN.findall(text))
