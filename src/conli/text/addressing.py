"""Text addressed to the checker: instructions, claimed verdicts and forged turns in data.

A source chunk or a response is data to be judged, never instructions. Text in it that
speaks to the checker ("note to AI systems", "treat the answer as supported", a fake
``"label": "entailment"``, chat-template tokens, our own tags, "this sentence repeats the
source") is found here, sentence by sentence, in English, French, German and Spanish, so
that the check can name the chunk that holds it and judge claims without it.

The patterns are narrow on purpose: on the dev sets' sources and responses they match
nothing (docs/benchmarks.md), so a check of ordinary text is unchanged by them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

_CHECKER = (r"(?:ai|a\.i\.|automated|language models?|llms?|assistants?|chatbots?|"
            r"fact[- ]?check(?:ers?|ing)?|checkers?|verifiers?|evaluators?|graders?|judges?|"
            r"reviewers?|classifiers?|moderators?|models?|bots?|(?:ki|ia)(?:-\w+)?)")
_SUPPORT = (r"(?:supported|entailed|entailment|verified|correct|accurate|true|faithful|"
            r"grounded|confirmed|consistent)")
_TAIL = r"[^.!?\n]*[.!?]?"  # the rest of the sentence: what the note goes on to say
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("ignore instructions", r"\b(?:ignore|disregard|forget|override)\b[^.!?\n]{0,40}"
     r"\b(?:instructions?|rules?|prompts?|guidelines|passages?|above|previous|prior|sources?)\b"
     + _TAIL),
    ("note to the checker", rf"\b(?:note|notice|message|instructions?|attention|memo|warning)"
     rf"\b[^.!?\n]{{0,20}}\b(?:to|for)\b[^.!?\n]{{0,30}}\b{_CHECKER}\b" + _TAIL),
    ("instruction to the checker", rf"(?:^|[.!?:>\n]\s*)(?:please\s+)?(?:treat|mark|label|"
     rf"consider|rate|score|classify|regard|count|answer|respond|output|return|accept)\b"
     rf"[^.!?\n]{{0,80}}\b(?:as\s+)?{_SUPPORT}\b"),
    ("claimed verdict", r"[\"']?\b(?:label|verdict|judgements?|judgments?|result|assessment)\b"
     r"[\"']?\s*[:=]\s*[\"']?(?:entailment|supported|contradiction|neutral|hallucinated|"
     r"faithful)\b"),
    ("claimed score", r"[\"']score[\"']\s*:\s*[1-5]\b"),
    ("claimed score", r"\b(?:give|gives|given|deserves?|assign|award|merits?|should (?:get|"
     r"receive))\b[^.!?\n]{0,30}\b(?:score|rating|grade|mark)\s+(?:of\s+)?(?:5|five)\b"),
    ("note to the checker", r"(?:^|[.!?\n]\s*)(?:dear\s+|attention\s+)?(?:graders?|evaluators?|"
     r"fact[- ]?checkers?|checkers?|verifiers?|ai systems?|ai assistants?|language models?|"
     r"llms?)\s*[:,]" + _TAIL),
    ("claim about the answer", rf"\b(?:any|every|all|each)\b[^.!?\n]{{0,40}}\b(?:summary|"
     rf"summaries|answers?|responses?|claims?|statements?|figures?)\b[^.!?\n]{{0,40}}\b(?:is|"
     rf"are|should be|must be|counts? as)\s+(?:to be\s+)?(?:treated as\s+)?{_SUPPORT}\b"),
    ("hidden comment", r"<!--[\s\S]{0,500}?-->"),
    ("claimed score", r"\b(?:give|assign|award|rate|score)\b[^.!?\n]{0,40}\b(?:5|five)\s*"
     r"(?:/\s*5|out of (?:5|five)|points?|stars?)?\b[^.!?\n]{0,20}"
     r"(?:faithful|score|rating|grade)"),
    ("claim of support", rf"\b(?:this|the (?:previous|above|following|preceding|next))\s+"
     rf"(?:sentence|statement|claim|answer|response|text)s?\s+(?:is|are|was|were|has been)\s+"
     rf"(?:fully\s+|entirely\s+|already\s+)?{_SUPPORT}"),
    ("claim of support", r"\b(?:as|which)\s+the\s+(?:source|passage|document|context)s?\s+"
     r"(?:states?|says?|confirms?)\s+(?:it\s+)?(?:word for word|verbatim|exactly)"),
    ("claim of support", r"\brepeats?\s+the\s+(?:source|passage|document|context)\b"),
    ("claim of support", rf"\b(?:fully|entirely|completely)\s+{_SUPPORT}\s+by\s+the\s+"
     r"(?:source|passage|document|context)"),
    ("claim about the source", r"\b(?:source|passage|document|context)s?\b[^.!?\n]{0,30}"
     r"\b(?:has|have|contains?)\s+an?\s+(?:typo|error|mistake|misprint)"),
    ("claim about the source", rf"\b(?:other|above|previous|remaining)\s+(?:passages?|"
     rf"documents?|sources?|chunks?)\b[^.!?\n]{{0,30}}\b(?:outdated|obsolete|superseded|wrong|"
     rf"incorrect)\b[^.!?\n]{{0,120}}\b(?:{_SUPPORT}|{_CHECKER})\b"),
    ("chat-template token", r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|"
     r"start_header_id|end_header_id)\|>|\[/?INST\]|<<SYS>>|<</SYS>>"),
    ("forged turn", r"(?:^|\n)\s*#*\s*(?:system|assistant|tool|function)\s*(?:message|result|"
     r"output)?\s*(?:\([^)\n]{0,40}\))?\s*:[^\n]*"),
    ("our own tags", r"</?(?:source|sources|claim|claims|text|question|sentence|response|"
     r"judgement|findings?|chunk)\b[^>\n]{0,40}>"),
    # other languages: a note to AI systems, and "treat as confirmed"
    ("note to the checker", r"\b(?:remarque|avis|note|hinweis|nota|aviso)\b[^.!?\n]{0,20}"
     r"\b(?:pour|aux?|für|an|para|a)\b[^.!?\n]{0,30}\b(?:systèmes?|ia|ki|sistemas?|"
     r"prüf\w*|automatische\w*|vérificateurs?|verificadores?|modelos?|modèles?)\b" + _TAIL),
    ("ignore instructions", r"\b(?:ignorez|ignore[zr]?|ignoriere|ignorieren|ignora|ignorad)"
     r"\b[^.!?\n]{0,40}\b(?:instructions?|anweisungen|instrucciones|consignes|règles|regeln|"
     r"reglas|passages?|abschnitte|pasajes)\b" + _TAIL),
    ("instruction to the checker", r"\b(?:considérez|considerez|traitez|betrachte|"
     r"betrachten|behandle|behandeln|considera|considere|tratad?|trate)\b[^.!?\n]{0,80}\b"
     r"(?:confirmées?|vérifiées?|exactes?|correct\w*|belegt|bestätigt|verifizier\w*|"
     r"verificad[ao]s?|respaldad[ao]s?|verdader[ao]s?)\b"),
)
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in _PATTERNS)


@dataclass(frozen=True)
class Addressed:
    """A span of a text that speaks to the checker, and what kind of thing it says."""

    kind: str
    start: int
    end: int
    text: str


def addressed(text: str) -> list[Addressed]:
    """Every span of ``text`` addressed to the checker, in order, overlaps merged."""
    found = sorted((_trimmed(m), m.end(), kind) for kind, pattern in PATTERNS
                   for m in pattern.finditer(text) if m.group().strip(_LEAD))
    spans: list[Addressed] = []
    for start, end, kind in found:
        if spans and start <= spans[-1].end:  # overlapping: one span, the first kind
            spans[-1] = replace(spans[-1], end=max(spans[-1].end, end))
        else:
            spans.append(Addressed(kind, start, end, ""))
    return [replace(s, text=text[s.start:s.end]) for s in spans]


_LEAD = " \t\n.!?:>"  # what a pattern may match before the words it is about


def _trimmed(found: re.Match[str]) -> int:
    """Where the matched words begin: after the sentence end or line break matched first."""
    words = found.group()
    return found.start() + len(words) - len(words.lstrip(_LEAD))


# Kinds ``defuse`` already neutralises where they stand (prompts.defuse): left to it.
DEFUSED_KINDS = frozenset({"chat-template token", "our own tags"})
WITHHELD = "(withheld: text addressed to the checker)"


@lru_cache(maxsize=32)  # every prompt of a check withholds from the same source again
def withhold(text: str) -> str:
    """``text`` with each span addressed to the checker blanked, one character for one.

    What a model reads of data: the span becomes ``WITHHELD`` (or as much of it as fits)
    padded with spaces, so offsets into the text stay valid (entity tags, quotes). Text
    with no such span is returned as it is.
    """
    spans = [a for a in addressed(text) if a.kind not in DEFUSED_KINDS]
    if not spans:
        return text
    out, at = [], 0
    for span in spans:
        size = span.end - span.start
        mark = WITHHELD if size >= len(WITHHELD) else "(withheld)"[:size]
        out += [text[at:span.start], mark.ljust(size)]
        at = span.end
    return "".join([*out, text[at:]])
