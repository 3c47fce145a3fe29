"""Whether the source mentions an entity word for word, to choose which entities to re-check.

The entity level exists to catch what the sentence level let through: above all a name,
number or date the source never gives. An entity the source states verbatim was already in
front of the sentence-level judge; re-asking about it cost a model call each and, measured
on the dev sets, flagged more faithful responses than it caught (docs/benchmarks.md).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cached_property, lru_cache

from conli.models import Entity
from conli.ner.names import SourceNames
from conli.ner.values import NOT_AFTER_WORD, NOT_BEFORE_WORD, Values, states, values_of

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_SPACE = re.compile(r"\s+")
_POSSESSIVE = re.compile(r"'s$")
_ELLIPSIS = re.compile(r"\.\.\.|…")
_QUOTE_EDGES = " .,;:\"'"
# The categories a claim turns on: names, numbers and dates. PersonType (nationalities,
# groups) and Skill are descriptions, not names. A number or date category counts only
# where it holds a value ("1913", "June 14"; not "recently" or "several").
NAMES = frozenset({"Person", "Location", "Organization", "Event", "Product"})
VALUED = frozenset({"Quantity", "DateTime"})
DECISIVE = NAMES | VALUED


def normalize(text: str) -> str:
    """Case-folded NFKC text with straight quotes and single spaces."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return _SPACE.sub(" ", text).strip()


def normalize_with_offsets(text: str) -> tuple[str, list[int]]:
    """``normalize(text)`` and, for each of its characters, the offset it came from in ``text``.

    Character by character, so a match in the normalized text maps back to the original's
    own words: what an audit shows as the source's span.
    """
    chars: list[str] = []
    offsets: list[int] = []
    for at, char in enumerate(text):
        piece = unicodedata.normalize("NFKC", char).translate(_QUOTES).casefold()
        if piece.isspace() or not piece:
            piece = " " if piece else ""
            if not chars or chars[-1] == " ":
                continue  # runs of space fold to one, and leading space goes
        for part in piece:
            chars.append(part)
            offsets.append(at)
    while chars and chars[-1] == " ":
        chars.pop()
        offsets.pop()
    return "".join(chars), offsets


@lru_cache(maxsize=8)
def mentions_of(source: str) -> SourceMentions:
    """The source's ``SourceMentions``, built once per source text (not once per step).

    The NLI agent, the detectors, ``ground`` and ``mitigate`` all ask it about one source
    in a check; its normalised text, values and words are read once and shared (read-only).
    """
    return SourceMentions(source)


class SourceMentions:
    """Answers "does the source contain this entity's text as whole words?" for one source."""

    def __init__(self, source: str) -> None:
        self._original = source
        self._source, self._offsets = normalize_with_offsets(source)

    @cached_property
    def _values(self) -> Values:
        """The source's numbers and dates, read once, on the first value looked up."""
        return values_of(self._original)

    @cached_property
    def _names(self) -> SourceNames:
        """The source's words, initials and acronyms, read once, on the first name looked up."""
        return SourceNames(self._original)

    def mentions(self, entity_text: str) -> bool:
        """True if the entity's normalized text occurs in the source, bounded by non-words.

        A Chinese or Japanese character next to it is no word boundary to cross: those
        scripts write no space ("2019" in "于2019年").
        """
        needle = _POSSESSIVE.sub("", normalize(entity_text))
        if not needle:
            return False
        pattern = rf"{NOT_AFTER_WORD}{re.escape(needle)}{NOT_BEFORE_WORD}"
        return re.search(pattern, self._source) is not None

    def states(self, entity_text: str, category: str) -> bool:
        """True if the source states the entity: word for word, or as the same value.

        A number or date is stated when every value it holds is among the source's
        ("2.4 million" = "2,400,000", "four" = "4", "June 14" = "14 June"); a name when the
        source writes it in one of its usual forms (``ner.names``: "Lind" for "Mara Lind",
        "US Soccer" for "the United States Soccer Federation").
        """
        if self.mentions(entity_text):
            return True
        if category in VALUED:
            claimed = values_of(entity_text)
            return bool(claimed) and states(self._values, claimed)
        return self._names.states(_POSSESSIVE.sub("", entity_text.strip()))

    def unstated(self, entities: Iterable[Entity]) -> list[Entity]:
        """The decisive entities (``DECISIVE``) the source never states (``states``)."""
        return [e for e in entities if decisive(e) and not self.states(e.text, e.category)]

    def quotes(self, evidence: str) -> bool:
        """True if ``evidence`` is a quote of the source: every part between ellipses occurs.

        Case, spacing and quote marks are normalised, and the quote's own trailing
        punctuation is ignored; otherwise the words must appear as written.
        """
        parts = self._parts(evidence)
        return bool(parts) and all(p in self._source for p in parts)

    def locate(self, evidence: str) -> tuple[int, int] | None:
        """Offsets in the source of the quote's first part (before any ellipsis), if it is there.

        None when ``evidence`` is not a quote of the source (``quotes``).
        """
        if not self.quotes(evidence):
            return None
        first = self._parts(evidence)[0]
        at = self._source.find(first)
        return self._offsets[at], self._offsets[at + len(first) - 1] + 1

    @staticmethod
    def _parts(evidence: str) -> list[str]:
        parts = [normalize(p).strip(_QUOTE_EDGES) for p in _ELLIPSIS.split(evidence)]
        return [p for p in parts if p]


def decisive(entity: Entity) -> bool:
    """Whether a claim turns on ``entity``: a name, or a number or date that holds a value."""
    if entity.category in NAMES:
        return True
    return entity.category in VALUED and bool(values_of(entity.text))
