"""The product's one sentence splitter: sentences with character offsets, and which to check.

Every part of conli that needs sentences cuts them here (``split_response``/``sentence_spans``):
the checked response, the source's sentences for word overlap and the judge, the source's
windows and the streamed reply. Offsets are Python string indices (code points);
``utf16_offset`` converts one for a JavaScript client.

Each cut takes the text's ``language`` (``conli.text.language``; English by default). In
English, Chinese and Japanese, responses are cut by spaCy's parser within each line (spaCy
would glue a heading to the next sentence) and sources by rules, without the parser (fast on
long documents). In every other language pySBD cuts each line (``text.pysbd_split``), so
"4,2 Mio. Euro" and "ca. 12.000" end no sentence; the rules and the parser are then the
fallback. List markers are left outside the sentence span. Every cut ends a sentence at a
Chinese or Japanese full stop (。！？) with no space after it, and none in a German date
("am 3. Oktober"), and data in a format of its own after a stop (a JSON object, a tag) is a
segment of its own, so no claim is judged with it glued on. Segments that carry no factual
claim (headings, lead-ins ending in ':', questions, fragments) are kept in the output but not
checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from conli.config import Language, LanguageSetting
from conli.text import pysbd_split
from conli.text.language import language_of, uses_pysbd
from conli.text.words import word_count

Span = tuple[int, int]

_LINE = re.compile(r"[^\n]+")
_PARAGRAPH = re.compile(r"(?:[^\n]|\n(?![^\S\n]*\n))+")  # up to a blank line
_HEADING = re.compile(r"^\s*(#{1,6}\s|\*\*[^*]+\*\*:?\s*$|[=\-_*]{3,}\s*$)")
_LIST_MARKER = re.compile(r"^\s*(?:[-*+•‣◦]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)])\s+")
MIN_CLAIM_WORDS = 3

WIDE_STOPS = "。！？｡"  # ideographic full stop, full-width ! and ?, half-width 。
_CLOSERS = "\"'”’)\\]）」』》〉】"  # what may follow a sentence's stop inside it
_WIDE_END = re.compile(rf"[{WIDE_STOPS}][.!?{WIDE_STOPS}]*[{_CLOSERS}]*")
# a stop, white space, then data in a format of its own (a JSON object or array, a markup tag):
# the data is a segment of its own, whatever its words, so it is never judged as part of a claim
_DATA_AFTER_STOP = re.compile(
    rf'[.!?…{WIDE_STOPS}][{_CLOSERS}]*(?=\s+(?:\{{|\[\s*[{{\["]|<[A-Za-z/!]))')
FINAL_STOP = re.compile(rf"[.!?…{WIDE_STOPS}][{_CLOSERS}]*$")  # text ends a sentence
# sources, by rules: a run of . ! ? or a line break ends a sentence; "2.4" does not
_RULE_SENTENCE = re.compile(r"(?:[^.!?\n]|(?<=\d)\.(?=\d))+[.!?]*")
# source windows: a stop ends a sentence before white space; a line break only at a blank line
_PARAGRAPH_BREAK = re.compile(r"(?<=[.!?])\s+|\n\s*\n")
_ORDINAL_END = re.compile(r"(?<![\d.])\d{1,2}\.$")  # "am 3." (German ordinal day)
_GERMAN_MONTHS = ("Januar", "Jänner", "Februar", "März", "Mai", "Juni", "Juli", "Oktober",
                  "Dezember")  # those not spelt as in English
_GERMAN_MONTH = re.compile(rf"(?:{'|'.join(_GERMAN_MONTHS)})\b")


@dataclass(frozen=True)
class Segment:
    """A slice ``response[start:end]`` and whether it is (a candidate for) a checked claim."""

    index: int
    text: str
    start: int
    end: int
    checked: bool


def is_claim(text: str) -> bool:
    """A factual claim: not a question, not a lead-in, and a few words or a number."""
    stripped = text.strip()
    if stripped.endswith(("?", "？", ":", "：")):
        return False
    words = word_count(stripped)
    return words >= MIN_CLAIM_WORDS or (any(ch.isdigit() for ch in stripped) and words >= 2)


def _trimmed(text: str, start: int, end: int) -> Span | None:
    """``(start, end)`` less the white space at either end; None if nothing is left."""
    piece = text[start:end]
    body = piece.strip()
    if not body:
        return None
    lead = len(piece) - len(piece.lstrip())
    return start + lead, start + lead + len(body)


def _cut_in_date(text: str, before: Span, after: Span) -> bool:
    """The cut between two spans falls in a German date: "am 3." | "Oktober 1998 ...".

    A text that ends in the month's first letters ("am 3. Okt", a reply still streaming
    in) is taken as that date too, so the cut is not handed on before the month is whole.
    """
    rest = text[after[0]:after[1]]
    month = _GERMAN_MONTH.match(rest) is not None or (
        after[1] == len(text) and any(m.startswith(rest) for m in _GERMAN_MONTHS))
    return (month and _ORDINAL_END.search(text, before[0], before[1]) is not None
            and "\n" not in text[before[1]:after[0]])


def _refined(text: str, spans: list[Span]) -> list[Span]:
    """Rules every cut shares: join a German date cut at its day, cut inside a span.

    A span is cut after 。！？, and before data in a format of its own (a JSON object or
    array, a markup tag) that follows a sentence's stop.
    """
    joined: list[Span] = []
    for span in spans:
        if joined and _cut_in_date(text, joined[-1], span):
            joined[-1] = (joined[-1][0], span[1])
        else:
            joined.append(span)
    out: list[Span] = []
    for start, end in joined:
        stops = sorted([*_WIDE_END.finditer(text, start, end),
                        *_DATA_AFTER_STOP.finditer(text, start, end)], key=lambda m: m.end())
        for stop in stops:
            if stop.end() < end and (cut := _trimmed(text, start, stop.end())):
                out.append(cut)
                start = stop.end()
        if cut := _trimmed(text, start, end):
            out.append(cut)
    return out


def _parsed_spans(line: str, nlp: Any, language: Language) -> list[Span]:
    """One line's sentences: by pySBD where it cuts ``language``, else by spaCy's parser."""
    found = pysbd_split.spans(line, language) if uses_pysbd(language) else None
    if found is None:
        parsed = (_trimmed(line, sent.start_char, sent.end_char) for sent in nlp(line).sents)
        found = [span for span in parsed if span]
    return _refined(line, found)


def split_response(response: str, nlp: Any, *, language: Language = "en") -> list[Segment]:
    """Non-blank segments in order (``response[s.start:s.end] == s.text``); headings unchecked.

    ``nlp`` (spaCy) cuts English, Chinese and Japanese, and any line pySBD would alter.
    """
    spans: list[tuple[int, int, bool]] = []
    for line in _LINE.finditer(response):
        text = line.group()
        if not text.strip():
            continue
        if _HEADING.match(text):
            lead = len(text) - len(text.lstrip())
            spans.append((line.start() + lead, line.start() + len(text.rstrip()), False))
            continue
        marker = _LIST_MARKER.match(text)
        offset = marker.end() if marker else 0
        for start, end in _parsed_spans(text[offset:], nlp, language):
            spans.append((line.start() + offset + start, line.start() + offset + end, True))
    return [
        Segment(index, response[start:end], start, end, candidate)
        for index, (start, end, candidate) in enumerate(spans)
    ]


def sentence_spans(text: str, nlp: Any | None = None, *, paragraphs: bool = False,
                   language: Language = "en") -> list[Span]:
    """Each sentence's ``(start, end)`` in ``text`` (code points), without surrounding space.

    With ``nlp``: as ``split_response`` cuts a response. Without it (the source's sentences
    for word overlap), in English, Chinese and Japanese by rules: a run of . ! ? or a line
    break ends a sentence, but "2.4" does not; in another language, pySBD cuts each line.
    ``paragraphs`` (source windows): a line break ends a sentence only where a blank line
    follows, so a list stays whole; a stop, only before white space (rules) or where pySBD
    cuts the paragraph. 。！？ end a sentence, and a German date does not, in all three.
    """
    if nlp is not None:
        if paragraphs:
            raise ValueError("paragraphs is a rule of its own: no parser with it")
        return [(s.start, s.end) for s in split_response(text, nlp, language=language)]
    if uses_pysbd(language):
        return list(_pysbd_spans(text, language, paragraphs))
    return _rule_spans(text, paragraphs)


def _rule_spans(text: str, paragraphs: bool) -> list[Span]:
    """``sentence_spans`` by conli's own rules (English, Chinese, Japanese; the fallback)."""
    if paragraphs:
        cuts = [0, *(i for m in _PARAGRAPH_BREAK.finditer(text) for i in m.span()), len(text)]
        found = [_trimmed(text, cuts[i], cuts[i + 1]) for i in range(0, len(cuts), 2)]
    else:
        found = [_trimmed(text, *m.span()) for m in _RULE_SENTENCE.finditer(text)]
    return _refined(text, [span for span in found if span])


@lru_cache(maxsize=8)
def _pysbd_spans(text: str, language: Language, paragraphs: bool) -> tuple[Span, ...]:
    """``sentence_spans`` by pySBD, a line (or a paragraph) at a time; kept for the next call.

    A check cuts its source several times (word overlap, windows, each detector, each
    sentence of a stream); pySBD takes about a second on 200,000 characters, so the last
    few cuts are kept. A piece pySBD would alter is cut by the rules instead.
    """
    pieces = _PARAGRAPH.finditer(text) if paragraphs else _LINE.finditer(text)
    found: list[Span] = []
    for piece in pieces:
        at = piece.start()
        cut = pysbd_split.spans(piece.group(), language)
        if cut is None:
            cut = _rule_spans(piece.group(), paragraphs)
        found += _refined(text, [(at + start, at + end) for start, end in cut])
    return tuple(found)


def utf16_offset(text: str, index: int) -> int:
    """The code-point offset ``index`` of ``text`` as a UTF-16 index (a JavaScript string's)."""
    return len(text[:index].encode("utf-16-le")) // 2


def sentence_splitter(nlp: Any | None = None, language: LanguageSetting = "en"
                      ) -> Callable[[str], list[str]]:
    """``text -> its sentences`` as ``split_response`` cuts them (spaCy loaded if not given).

    ``auto``: each text in the language it is detected in (``text.language``).
    """
    if nlp is None:
        from conli.text.nlp import load_pipeline

        nlp = load_pipeline()

    def split(text: str) -> list[str]:
        found = split_response(text, nlp, language=language_of(language, text))
        return [segment.text for segment in found]

    return split


def select_claims(segments: list[Segment]) -> list[Segment]:
    """Keep ``checked`` only on candidates that make a factual claim.

    A response with no such sentence (a short answer like "Arthur's Magazine") is itself
    the claim, so then every candidate is checked rather than none.
    """
    selected = [replace(s, checked=s.checked and is_claim(s.text)) for s in segments]
    return selected if any(s.checked for s in selected) else segments
