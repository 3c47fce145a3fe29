"""Whether the source mentions an entity word for word, to choose which entities to re-check.

The entity level exists to catch what the sentence level let through: above all a name,
number or date the source never gives. An entity the source states verbatim was already in
front of the sentence-level judge; re-asking about it cost a model call each and, measured
on the dev sets, flagged more faithful responses than it caught (docs/benchmarks.md).
"""

from __future__ import annotations

import re
import unicodedata

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_SPACE = re.compile(r"\s+")
_POSSESSIVE = re.compile(r"'s$")
_ELLIPSIS = re.compile(r"\.\.\.|…")
_QUOTE_EDGES = " .,;:\"'"


def normalize(text: str) -> str:
    """Case-folded NFKC text with straight quotes and single spaces."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return _SPACE.sub(" ", text).strip()


class SourceMentions:
    """Answers "does the source contain this entity's text as whole words?" for one source."""

    def __init__(self, source: str) -> None:
        self._source = normalize(source)

    def mentions(self, entity_text: str) -> bool:
        """True if the entity's normalized text occurs in the source, bounded by non-words."""
        needle = _POSSESSIVE.sub("", normalize(entity_text))
        if not needle:
            return False
        pattern = rf"(?<!\w){re.escape(needle)}(?!\w)"
        return re.search(pattern, self._source) is not None

    def quotes(self, evidence: str) -> bool:
        """True if ``evidence`` is a quote of the source: every part between ellipses occurs.

        Case, spacing and quote marks are normalised, and the quote's own trailing
        punctuation is ignored; otherwise the words must appear as written.
        """
        parts = [normalize(p).strip(_QUOTE_EDGES) for p in _ELLIPSIS.split(evidence)]
        parts = [p for p in parts if p]
        return bool(parts) and all(p in self._source for p in parts)
