"""The language of a check's texts: it picks the splitter, the stop words and whether NER runs.

``language_of`` turns the ``language`` setting into a language. ``auto`` reads a text,
cheaply and deterministically, with no model (``guess_language``):

1. Chinese or Japanese when their characters outnumber the words of other scripts in the
   source's first 10,000 characters (Japanese when a tenth or more of them are kana);
2. else the language whose spaCy stop list holds the most of those words, if it holds at
   least two and strictly more than any other list;
3. else English: a tie, or too few stop words to tell.

A check's language is the response's (``claims_language``; the source's only when the
response does not tell): the answer is cut in its own language, and no chunk in another
script among the sources can change how the claims are read (issue 61). Each source is
cut in its own language where it is cut (windows, chunks). Under ``auto`` each sentence
of the response is read in its own language where it clearly has one
(``sentence_language``), so the names of an English sentence are compared with the
source's whatever the other sentences are written in. What each language gets:

- sentences (``segment``): conli's own splitter for English (every measured figure and the
  trained classifiers' features rest on it) and for Chinese and Japanese; pySBD, the
  rule-based splitter RAGAS uses, for the others;
- stop words (``stop_words``): spaCy's list of the language, for every signal on words;
- entities: the English spaCy NER on English only (``english_ner_runs``); numbers and
  dates are compared in every language (``ner.claims``).
"""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import get_args

from conli.config import Language as Language  # the codes; importable from here too

LANGUAGES: tuple[Language, ...] = get_args(Language)
OWN_SPLITTER: frozenset[Language] = frozenset({"en", "zh", "ja"})  # the rest: pySBD
SAMPLE_CHARS = 10_000  # of the source, read to tell its language
MIN_STOP_WORDS = 2  # a language wins on at least this many of its stop words
_CJK = frozenset({"zh", "ja"})
_KANA = re.compile(r"[\u3040-\u30ff]")
_IDEOGRAPH = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
_WORD = re.compile(r"[^\W\d_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def uses_pysbd(language: Language) -> bool:
    """True where pySBD cuts the sentences (every language but English, Chinese, Japanese)."""
    return language not in OWN_SPLITTER


def english_ner_runs(language: Language) -> bool:
    """True where the English spaCy NER may read the text: on English only."""
    return language == "en"


def language_of(setting: str, source: str) -> Language:
    """The language a check reads its texts in: ``setting``, or the source's for ``auto``."""
    if setting != "auto":
        for language in LANGUAGES:
            if setting == language:
                return language
        raise ValueError(f"no such language: {setting!r}")
    return detect_language(source)


def claims_language(setting: str, response: str, source: str) -> Language:
    """The language a check reads its claims in: ``setting``, or under ``auto`` the response's.

    The source's decides when the response does not tell (too few words), or when it tells
    another language only by a single letter or a shared word (``_ahead``): a chunk in
    another script among the sources changes nothing the response tells by itself.
    """
    if setting != "auto":
        return language_of(setting, response)
    told, source_language = guess_language(response), detect_language(source)
    if told is None or told == source_language or source_language in _CJK:
        return told or source_language
    ahead = _ahead(response[:SAMPLE_CHARS], told, source_language, MIN_STOP_WORDS)
    return told if ahead else source_language


SENTENCE_STOP_WORDS = 3  # a sentence tells its own language with this many stop words


def sentence_language(sentence: str, default: Language) -> Language:
    """The language of one sentence where it clearly has its own, else ``default``.

    By script (Chinese, Japanese), or by stop words of more than one letter: at least 3 of
    one language, and 2 more than of ``default``'s. A short sentence ("Die Hard premiered
    in 1988") keeps ``default``, and so do English ones a single letter or a shared word
    would tip ("There's ... U.", "Chris Carter is American, van Gogh is Dutch").
    """
    sample = sentence[:SAMPLE_CHARS]
    guess = _guess(sample, SENTENCE_STOP_WORDS)
    if guess is None or guess == default or guess in _CJK:
        return guess or default
    return guess if _ahead(sample, guess, default, SENTENCE_STOP_WORDS) else default


def _ahead(sample: str, guess: Language, default: Language, least: int) -> bool:
    """Whether ``guess`` leads ``default``: ``least`` stop words of 2+ letters, 2 more than it.

    A single letter ("O'Meara", "U.S.") or a word two languages share ("is", "van") does not
    move an English text into Slovak or Dutch.
    """
    counts = _stop_counts(w for w in _WORD.findall(sample) if len(w) > 1)
    return counts[guess] >= least and counts[guess] - counts[default] >= 2


def language_of_claim(sentence: str, setting: str, language: Language) -> Language:
    """The language one claim is read in: its own under ``auto``, else the setting's."""
    return sentence_language(sentence, language) if setting == "auto" else language


def detect_language(text: str) -> Language:
    """``guess_language``, or English when the text does not tell."""
    return guess_language(text) or "en"


def guess_language(text: str) -> Language | None:
    """The language of ``text`` by script and stop words (see the module), None if unsure."""
    return _guess(text[:SAMPLE_CHARS])


@lru_cache(maxsize=256)
def _guess(sample: str, least: int = MIN_STOP_WORDS) -> Language | None:
    words = _WORD.findall(sample)
    cjk = len(_IDEOGRAPH.findall(sample))
    kana = len(_KANA.findall(sample))
    if cjk + kana > len(words):
        return "ja" if kana * 10 >= cjk + kana else "zh"
    ranked = _stop_counts(words).most_common(2)
    if not ranked or ranked[0][1] < least:
        return None
    if len(ranked) > 1 and ranked[1][1] == ranked[0][1]:
        return None
    return ranked[0][0]


def _stop_counts(words: Iterable[str]) -> Counter[Language]:
    """How many of ``words`` each language told by its words holds as stop words."""
    return Counter(lang for word in words for lang in _stop_index().get(word.lower(), ()))


@lru_cache(maxsize=1)
def _stop_index() -> dict[str, tuple[Language, ...]]:
    """Each stop word of a language told by its words (not by script) -> those languages."""
    index: dict[str, list[Language]] = {}
    for language in LANGUAGES:
        if language not in _CJK:
            for word in stop_words(language):
                index.setdefault(word, []).append(language)
    return {word: tuple(languages) for word, languages in index.items()}


@lru_cache(maxsize=len(LANGUAGES))
def stop_words(language: Language) -> frozenset[str]:
    """The stop words of ``language`` (spaCy's), lower-cased, without any holding a digit.

    A number is never a stop word here (spaCy's Chinese list has the digits): numbers are
    the facts conli checks most.
    """
    return frozenset(word.lower() for word in _spacy_stop_list(language)
                     if not any(ch.isdigit() for ch in word))


def _spacy_stop_list(language: Language) -> set[str]:
    """``spacy.lang.<language>.stop_words.STOP_WORDS``, read from its file.

    Each stop list is a plain module, but importing it runs its language's package first,
    and French's builds its tokenizer exceptions then (3 s): the file alone is read instead.
    """
    spec = importlib.util.find_spec("spacy")
    if spec is None or spec.origin is None:
        raise ImportError("spaCy is not installed: pip install 'spacy>=3.8,<3.9'")
    path = Path(spec.origin).parent / "lang" / language / "stop_words.py"
    module_spec = importlib.util.spec_from_file_location(f"_conli_stop_words_{language}", path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"spaCy has no stop words for {language} at {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return set(module.STOP_WORDS)
