"""conli's copy of NLTK's Porter stemmer stems every word as NLTK does (issue 64).

The classifiers' features, the evidence windows and coverage read these stems, so a stem
that differed would change shipped decisions: the copy is held equal to NLTK's own over
every word of the dev sets (../shared/data) and over words built to reach every rule.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from nltk.stem.porter import PorterStemmer

from conli.text import porter
from conli.text.words import terms
from tests.support.paths import ROOT

DATA = ROOT.parent / "shared" / "data"
# every suffix a rule of the algorithm names, and some it does not
SUFFIXES = (
    "", "s", "es", "ies", "ied", "ed", "eed", "ing", "y", "ly", "alli", "ational", "tional",
    "enci", "anci", "izer", "bli", "entli", "eli", "ousli", "ization", "ation", "ator", "alism",
    "iveness", "fulness", "ousness", "aliti", "iviti", "biliti", "fulli", "logi", "icate",
    "ative", "alize", "iciti", "ical", "ful", "ness", "al", "ance", "ence", "er", "ic", "able",
    "ible", "ant", "ement", "ment", "ent", "sion", "tion", "ion", "ou", "ism", "ate", "iti",
    "ous", "ive", "ize", "e", "ll", "at", "bl", "iz", "sses", "ss")
ODD = ("", "a", "y", "yy", "yyyyyyyy", "by", "ay", "sky", "skies", "dying", "Dying", "SKIES",
       "news", "succeed", "İstanbul", "İİ", "Σσ", "straße", "a*d", "ba*d", "x1", "1990s", "’s")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _dev_words() -> set[str]:
    words: set[str] = set()
    for path in sorted(DATA.rglob("*")):
        if path.suffix == ".json":
            texts = list(_strings(json.loads(path.read_text(encoding="utf-8"))))
        elif path.suffix == ".jsonl":
            texts = [t for line in path.read_text(encoding="utf-8").splitlines() if line
                     for t in _strings(json.loads(line))]
        elif path.suffix in (".tsv", ".txt"):
            texts = [path.read_text(encoding="utf-8")]
        else:
            continue
        words.update(w for text in texts for w in terms(text.lower()))
    return words


def _differing(words: list[str]) -> list[tuple[str, str, str]]:
    nltk = PorterStemmer()
    return [(w, nltk.stem(w), porter.stem(w)) for w in words if nltk.stem(w) != porter.stem(w)]


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is absent")
def test_every_word_of_the_dev_sets_stems_as_nltk_stems_it() -> None:
    words = sorted(_dev_words())
    assert len(words) > 30_000  # the sets were read
    assert _differing(words) == []


@pytest.mark.slow
def test_words_built_to_reach_every_rule_stem_as_nltk_stems_them() -> None:
    rng = random.Random(64)
    roots = ["connect", "gener", "hop", "fil", "tann", "troubl", "conflat", "siz", "feed", "agre",
             "motor", "happ", "enjo", "rel", "valen", "radic", "differ", "analog", "archaeo",
             "geo", "form", "electr", "good", "reviv", "allow", "adopt", "control", "ceas",
             "rat", "probat", "ti", "spi", "fl", "tr", "sy", "oat", "tree", "ivy", "orrer"]
    letters = "aeiouybcdlstrnmwxz"
    words = [r + s for r in roots for s in SUFFIXES]
    words += ["".join(rng.choice(letters) for _ in range(rng.randint(1, 9))) + rng.choice(SUFFIXES)
              for _ in range(50_000)]
    assert _differing([*words, *ODD]) == []


def test_the_copy_keeps_nltks_own_examples() -> None:
    assert [porter.stem(w) for w in ("caresses", "ponies", "dies", "flies", "happy", "enjoy",
                                     "relational", "generalization", "hopping", "filing")] == \
        ["caress", "poni", "die", "fli", "happi", "enjoy", "relat", "gener", "hop", "file"]
