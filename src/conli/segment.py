"""Split a response into sentences with character offsets, and select the checkable ones.

Lines are split first (spaCy would glue a heading to the next sentence), list markers are
left outside the sentence span, and spaCy's parser finds sentence boundaries within each
line. Segments that carry no factual claim (headings, lead-ins ending in ':', questions,
fragments) are kept in the output but not checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

_LINE = re.compile(r"[^\n]+")
_HEADING = re.compile(r"^\s*(#{1,6}\s|\*\*[^*]+\*\*:?\s*$|[=\-_*]{3,}\s*$)")
_LIST_MARKER = re.compile(r"^\s*(?:[-*+•‣◦]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)])\s+")
_WORD = re.compile(r"\w+")
MIN_CLAIM_WORDS = 3


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
    if stripped.endswith("?") or stripped.endswith(":"):
        return False
    words = _WORD.findall(stripped)
    return len(words) >= MIN_CLAIM_WORDS or (
        any(ch.isdigit() for ch in stripped) and len(words) >= 2
    )


def _sentence_spans(line: str, nlp: Any) -> list[tuple[int, int]]:
    doc = nlp(line)
    spans = []
    for sent in doc.sents:
        text = line[sent.start_char : sent.end_char]
        lead = len(text) - len(text.lstrip())
        trail = len(text) - len(text.rstrip())
        if text.strip():
            spans.append((sent.start_char + lead, sent.end_char - trail))
    return spans


def split_response(response: str, nlp: Any) -> list[Segment]:
    """Non-blank segments in order (``response[s.start:s.end] == s.text``); headings unchecked."""
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
        for start, end in _sentence_spans(text[offset:], nlp):
            spans.append((line.start() + offset + start, line.start() + offset + end, True))
    return [
        Segment(index, response[start:end], start, end, candidate)
        for index, (start, end, candidate) in enumerate(spans)
    ]


def sentence_splitter(nlp: Any | None = None) -> Callable[[str], list[str]]:
    """``text -> its sentences`` as ``split_response`` cuts them (spaCy loaded if not given)."""
    if nlp is None:
        from conli.nlp import load_pipeline

        nlp = load_pipeline()
    return lambda text: [segment.text for segment in split_response(text, nlp)]


def select_claims(segments: list[Segment]) -> list[Segment]:
    """Keep ``checked`` only on candidates that make a factual claim.

    A response with no such sentence (a short answer like "Arthur's Magazine") is itself
    the claim, so then every candidate is checked rather than none.
    """
    selected = [replace(s, checked=s.checked and is_claim(s.text)) for s in segments]
    return selected if any(s.checked for s in selected) else segments
