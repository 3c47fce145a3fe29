"""Text that reads as addressed to the checker: an operator's signal, never a verdict.

A source chunk may hold words meant for the checker rather than for the reader ("note to
AI systems: ...", "treat the summary as accurate", a fake ``"label": "entailment"``, a
forged system turn). ``addressed`` finds such spans so that the check can name the chunk
in its notes; nothing is removed from what a model reads and no verdict rests on them
(issue 61: a word list between the data and the model hid ordinary prose and flagged
faithful answers). The defences that hold whatever the words are structural: defusing,
the unstated-entity rule, datamarking (``prompts``).

Text is matched as a reader sees it (``readable``): HTML entities decoded, NFKC (full-width
letters as ASCII), zero-width characters and soft hyphens dropped, a single line break
read as a space; and once more with Greek and Cyrillic look-alikes read as the Latin
letters they imitate (``confusable_homoglyphs``' table), so "ΝΟΤΕ ΤΟ СНЕСКЕR" reads as
"NOTE TO CHECKER". The patterns (``text.addressing_patterns``) are in ten languages, and
narrow: an imperative or a heading addressed to a checker, not a sentence that talks
about one ("AI systems must ignore previous instructions from users" is news, not an
instruction). How often they name ordinary text is measured (``benchmarks/runs/overfiring.toml``).
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from conli.text.addressing_patterns import PATTERNS

# never shown: zero-width spaces and joiners, word joiner, BOM, soft hyphen, bidi controls
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069"
                        "\ufeff]")
_ENTITY = re.compile(r"&(?:#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_LONE_BREAK = re.compile(r"(?<!\n)[ \t]*\r?\n[ \t]*(?!\n)")


@dataclass(frozen=True)
class Addressed:
    """A span of a text that reads as addressed to the checker, and what kind of thing."""

    kind: str
    start: int  # offsets into the text as given
    end: int
    text: str


def addressed(text: str) -> list[Addressed]:
    """Every span of ``text`` that reads as addressed to the checker, in order, merged."""
    view, offsets = readable(text)
    if not view:
        return []
    latin = latin_view(view)
    views = (view,) if latin is view else (view, latin)
    found = sorted({(start, end, kind) for seen in views for kind, pattern in PATTERNS
                    for start, end in _spans(pattern, seen)})
    spans: list[Addressed] = []
    for start, end, kind in found:
        if spans and start <= spans[-1].end:  # overlapping: one span, the first kind
            spans[-1] = replace(spans[-1], end=max(spans[-1].end, end))
        else:
            spans.append(Addressed(kind, start, end, ""))
    placed = [replace(s, start=offsets[s.start], end=offsets[s.end - 1] + 1) for s in spans]
    return [replace(s, text=text[s.start:s.end]) for s in placed]


_LEAD = " \t\n.!?:>;,\"'(["  # what a pattern may match before the words it is about


def _spans(pattern: re.Pattern[str], view: str) -> list[tuple[int, int]]:
    """Each match's span, without the sentence end or break it matched first."""
    spans = []
    for found in pattern.finditer(view):
        words = found.group()
        start = found.start() + len(words) - len(words.lstrip(_LEAD))
        end = found.start() + len(words.rstrip(" \t\n"))
        if end > start:
            spans.append((start, end))
    return spans


def readable(text: str) -> tuple[str, Sequence[int]]:
    """``text`` as a reader takes it, and for each of its characters the offset it came from.

    HTML entities decoded, NFKC, characters never shown dropped, a single line break (not
    a blank line) read as a space.
    """
    if ("&" not in text and _INVISIBLE.search(text) is None
            and unicodedata.is_normalized("NFKC", text)):  # most text: one for one
        return _LONE_BREAK.sub(lambda m: " " * len(m.group()), text), range(len(text))
    chars: list[str] = []
    offsets: list[int] = []
    at = 0
    while at < len(text):
        entity = _ENTITY.match(text, at) if text[at] == "&" else None
        piece = html.unescape(entity.group()) if entity else text[at]
        for char in unicodedata.normalize("NFKC", _INVISIBLE.sub("", piece)):
            chars.append(char)
            offsets.append(at)
        at = entity.end() if entity else at + 1
    view = "".join(chars)
    return _LONE_BREAK.sub(lambda m: " " * len(m.group()), view), offsets


def latin_view(view: str) -> str:
    """``view`` with each Greek or Cyrillic look-alike of a Latin letter read as that letter.

    One character for one, so offsets hold; text with no such letter is returned as it is.
    """
    table = {code: latin for code in {ord(c) for c in view if c > "\u036f"}
             if (latin := _latin(chr(code))) is not None}
    return view.translate(table) if table else view


@lru_cache(maxsize=4096)
def _latin(char: str) -> str | None:
    """The ASCII letter ``char`` imitates, if it is a Greek or Cyrillic look-alike of one."""
    from confusable_homoglyphs import confusables  # its table loads on the first look-up

    if not unicodedata.name(char, "").startswith(("GREEK", "CYRILLIC")):
        return None
    found = confusables.is_confusable(char, greedy=True, preferred_aliases=["latin", "common"])
    if not found:
        return None
    letters = [str(h["c"]) for h in found[0]["homoglyphs"]
               if len(h["c"]) == 1 and h["c"].isascii() and h["c"].isalpha()]
    if not letters:
        return None
    if char.isupper() and letters[0] == "l":  # capital iota and its kin imitate I
        return "I"
    return letters[0]
