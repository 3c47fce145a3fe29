"""pySBD's sentences as spans of the text it was given (``segment`` calls it; nothing else).

pySBD (the rule-based splitter RAGAS uses) knows each language's abbreviations and number
formats: "4,2 Mio. Euro", "ca. 12.000", "etc.". Its own character offsets are found by
searching the text again, and it may drop white space even when told not to clean, so each
sentence is located here instead: the sentences must hold the text's non-space characters in
order, or ``spans`` gives None and the caller cuts by its own rules. One segmenter per
language is kept; each call builds its own processor, so threads may share it.

Titles before a name ("Sr. García", "Dr. Leroy", "sig. Rossi") and a few number words
("mill.", "aprox.", "mln.") are added to pySBD's lists of those languages: without them pySBD
ends a sentence at each.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from conli.config import Language

Span = tuple[int, int]

_BREAKS = re.compile(r"[\r\n]")
_SPACE = re.compile(r"\s*")
# titles before a name, by language: they end no sentence, whatever follows them
_TITLES: dict[str, tuple[str, ...]] = {
    "es": ("sr", "sra", "srta", "sres", "dr", "dra", "lic", "ing", "prof"),
    "fr": ("dr", "pr", "mme", "mlle", "mgr"),
    "it": ("sig", "sigg", "dott", "prof", "ing", "avv"),
}
# abbreviations pySBD's lists lack: a lower-case word or a number after them goes on
_MORE: dict[str, tuple[str, ...]] = {
    "es": ("mill", "aprox", "máx", "mín"),
    "it": ("mln", "mld"),
}


def spans(text: str, language: Language) -> list[Span] | None:
    """The sentences of ``text`` as pySBD cuts them, stripped; None if pySBD altered the text.

    Line breaks are read as spaces (the caller decides what a line break does), which keeps
    every offset.
    """
    flat = _BREAKS.sub(" ", text)
    return _located(text, _segmenter(language).processor(flat).process() or [])


def _located(text: str, sentences: list[str]) -> list[Span] | None:
    """Where each of ``sentences`` lies in ``text``, in order, without surrounding space."""
    found: list[Span] = []
    at = 0
    for sentence in sentences:
        body = sentence.strip()
        if not body:
            continue
        start = _past_space(text, at)
        end = start + len(body) if text.startswith(body, start) else _walk(text, start, body)
        if end is None:
            return None
        found.append((start, end))
        at = end
    return found if _past_space(text, at) == len(text) else None


def _past_space(text: str, at: int) -> int:
    """The first offset from ``at`` on that is not white space (``len(text)``: none)."""
    space = _SPACE.match(text, at)
    return space.end() if space else at


def _walk(text: str, start: int, body: str) -> int | None:
    """The end of ``body`` read from ``start``, white space aside (None: they differ)."""
    wanted = [ch for ch in body if not ch.isspace()]
    at = start
    for ch in wanted:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text) or text[at] != ch:
            return None
        at += 1
    return at


@cache
def _segmenter(language: Language) -> Any:
    """The pySBD segmenter of ``language``, with conli's additions to its abbreviations."""
    import pysbd

    segmenter = pysbd.Segmenter(language=language, clean=False)
    titles, more = _TITLES.get(language, ()), _MORE.get(language, ())
    if titles or more:
        segmenter.language_module = _extended(segmenter.language_module, titles, more)
    return segmenter


def _extended(base: Any, titles: tuple[str, ...], more: tuple[str, ...]) -> Any:
    """The pySBD language class ``base`` with ``titles`` prepositive and ``more`` known."""
    known = base.Abbreviation
    abbreviation = type("Abbreviation", (known,), {
        "ABBREVIATIONS": [*known.ABBREVIATIONS, *titles, *more],
        "PREPOSITIVE_ABBREVIATIONS": [*known.PREPOSITIVE_ABBREVIATIONS, *titles],
    })
    return type(f"Conli{base.__name__}", (base,), {"Abbreviation": abbreviation})
