"""Word-level signals of seed 001 (§3.1): how much of a sentence the source's words cover.

Words (``conli.text.words``, any script) are lower-cased, stemmed (NLTK's Porter, as
rouge-score does: ``text.porter``) and the stop words of the text's language dropped
(``text.language.stop_words``, spaCy's lists; English unless told), so "opened"/"opens" match
and neither "the" nor German "der" counts as support. Numbers keep their digits. Source
sentences are cut by ``text.segment.sentence_spans`` without the parser, in the same language.
The same words give coverage's ROUGE-1 recall of a point and the word scores: a response
word scores 1 (hallucinated) when neither it nor its stem is in the source, else 0.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from conli.config import Language
from conli.models import WordScore
from conli.ner.grounding import SourceMentions, mentions_of
from conli.text import porter
from conli.text.language import english_ner_runs
from conli.text.language import stop_words as stop_words  # by language; tests import it here
from conli.text.segment import Segment
from conli.text.segment import sentence_spans as sentence_spans  # the source's sentences, by rules
from conli.text.words import terms, written_words

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# spaCy labels that name something (numbers and dates are compared as numbers instead)
NAME_LABELS = frozenset({"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "PRODUCT",
                         "WORK_OF_ART", "LAW", "LANGUAGE"})


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return porter.stem(word)


def content_words(text: str, language: Language = "en") -> list[str]:
    """Stemmed content words of ``text``, in order (``language``'s stop words dropped)."""
    stop = stop_words(language)
    return [_stem(w) for w in terms(text.lower()) if w not in stop]


def numbers(text: str) -> list[str]:
    """Numbers in ``text`` as written, without thousands separators."""
    return [n.replace(",", "") for n in _NUMBER.findall(text)]


@dataclass(frozen=True)
class SourceWords:
    """A source's content words, per sentence and in all, for overlap lookups."""

    words: frozenset[str]
    sentences: tuple[frozenset[str], ...]
    texts: tuple[str, ...]  # the source sentences ``sentences`` index, as written
    numbers: frozenset[str]
    mentions: SourceMentions
    language: Language = "en"  # of the source and of the sentences held against it

    @classmethod
    def of(cls, source: str, language: Language = "en") -> SourceWords:
        """Index ``source`` once for every sentence of a response, in ``language``."""
        found = [(source[start:end], frozenset(content_words(source[start:end], language)))
                 for start, end in sentence_spans(source, language=language)]
        found = [(text, words) for text, words in found if words]
        return cls(
            words=frozenset().union(*(w for _, w in found)) if found else frozenset(),
            sentences=tuple(w for _, w in found),
            texts=tuple(t for t, _ in found),
            numbers=frozenset(numbers(source)),
            mentions=mentions_of(source),
            language=language,
        )


@dataclass(frozen=True)
class Overlap:
    """How a sentence's words stand against the source."""

    precision: float  # share of its content words found anywhere in the source (ROUGE-1 P)
    best_sentence: float  # the same share against the single best source sentence
    closest: str  # that source sentence ("" if none shares a word)
    novel_words: list[str]  # content words the source never uses
    novel_numbers: list[str]  # numbers the source never states
    novel_entities: list[str]  # names the source never states word for word


def overlap(sentence: str, source: SourceWords, entities: Iterable[str] = ()) -> Overlap:
    """The word-level signals of ``sentence`` against an indexed source (in its language)."""
    words = content_words(sentence, source.language)
    unique = set(words)
    found = [w for w in words if w in source.words]
    shared = [len(unique & s) for s in source.sentences]
    best = max(range(len(shared)), key=shared.__getitem__, default=None)
    best_count = shared[best] if best is not None else 0
    return Overlap(
        precision=len(found) / len(words) if words else 1.0,
        best_sentence=best_count / len(unique) if unique else 1.0,
        closest=source.texts[best] if best is not None and best_count else "",
        novel_words=sorted({w for w in words if w not in source.words}),
        novel_numbers=[n for n in numbers(sentence) if n not in source.numbers],
        novel_entities=[e for e in entities if not source.mentions.mentions(e)],
    )


def entity_texts(nlp: Any, segments: Iterable[Segment],
                 language: Language = "en") -> dict[int, list[str]] | None:
    """The names spaCy finds in each checked segment (for the novel-entity signal).

    None where the English NER must not read the text (``language`` is not English): the
    caller says the signal was skipped.
    """
    if not english_ner_runs(language):
        return None
    return {
        s.index: [e.text for e in nlp(s.text).ents if e.label_ in NAME_LABELS]
        for s in segments if s.checked
    }


# --- words of a text: coverage's and the word scores' (seed 001) -------------------------


def words(text: str, language: Language = "en") -> list[tuple[str, int, int, str]]:
    """Content words of ``text`` as (text, start, end, stem); ``language``'s stop words dropped."""
    stop = stop_words(language)
    found = []
    for match in written_words(text):
        lower = match.group().lower()
        if lower in stop:
            continue
        stems = content_words(lower, language)
        if stems:
            found.append((match.group(), match.start(), match.end(), stems[0]))
    return found


def stems(text: str, language: Language = "en") -> frozenset[str]:
    """The set of stemmed content words of ``text`` (ROUGE-1 with stop words dropped)."""
    return frozenset(content_words(text, language))


def word_scores(text: str, reference: str, language: Language = "en") -> list[WordScore]:
    """Each content word of ``text``: 0 when ``reference`` has it (or its stem), else 1."""
    known = stems(reference, language) | {w.group().lower() for w in written_words(reference)}
    return [WordScore(text=word, start=start, end=end, method="lexical",
                      score=0.0 if stem in known or word.lower() in known else 1.0)
            for word, start, end, stem in words(text, language)]


def recall(point: str, text: str, language: Language = "en") -> float:
    """ROUGE-1 recall of ``point`` in ``text``: the share of its content words ``text`` has.

    A point with no content word counts as covered (1.0): nothing in it can be missing.
    """
    wanted = stems(point, language)
    return len(wanted & stems(text, language)) / len(wanted) if wanted else 1.0


def best_sentence(point: str, sentences: Sequence[str],
                  language: Language = "en") -> tuple[int | None, float]:
    """The index of the sentence that shares most of ``point``'s words, and that recall."""
    scored = [(recall(point, s, language), i) for i, s in enumerate(sentences)]
    value, index = max(scored, default=(0.0, -1))
    return (index if value > 0 else None), value
