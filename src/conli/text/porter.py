"""NLTK's Porter stemmer in its default mode (``NLTK_EXTENSIONS``), without importing NLTK.

Derived from ``nltk/stem/porter.py`` of NLTK 3.10.4, Copyright (C) 2001-2026 NLTK Project,
under the Apache License 2.0 (``porter-LICENSE.txt`` beside this file). Changed: only the
default mode is kept, as functions with type hints; the rules, their order and their
conditions are NLTK's. Why a copy: NLTK's ``porter.py`` imports the ``nltk`` package, whose
``__init__`` loads SciPy, scikit-learn and pandas (5 s at start-up), and no stemmer library
stems as it does (Snowball's and PyStemmer's Porter differ on 898 of the dev sets' 40,874
words), while conli's word overlap, evidence windows and coverage all read these stems.
``tests/text/test_porter.py`` holds every stem equal to NLTK's over the dev sets' words.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Condition = Callable[[str], bool] | None
Rule = tuple[str, str, Condition]

_VOWELS = frozenset("aeiou")
# NLTK's irregular forms: "the errors actually drawn to Martin Porter's attention over a
# 20 year period"
_IRREGULAR: dict[str, tuple[str, ...]] = {
    "sky": ("sky", "skies"), "die": ("dying",), "lie": ("lying",), "tie": ("tying",),
    "news": ("news",), "inning": ("innings", "inning"), "outing": ("outings", "outing"),
    "canning": ("cannings", "canning"), "howe": ("howe",), "proceed": ("proceed",),
    "exceed": ("exceed",), "succeed": ("succeed",),
}
_POOL = {form: stem for stem, forms in _IRREGULAR.items() for form in forms}


def stem(word: str) -> str:
    """``word``'s stem, as ``nltk.stem.PorterStemmer().stem(word)`` gives it."""
    lowered = word.lower()
    if lowered in _POOL:
        return _POOL[lowered]
    if len(word) <= 2:  # NLTK leaves words of one or two characters as they are
        return lowered
    for step in (_step1a, _step1b, _step1c, _step2, _step3, _step4, _step5a, _step5b):
        lowered = step(lowered)
    return lowered


def _is_consonant(word: str, i: int) -> bool:
    """A letter other than a vowel, and other than a "y" after a consonant."""
    if word[i] in _VOWELS:
        return False
    if word[i] == "y":
        negate = False
        while i > 0 and word[i] == "y":
            negate = not negate
            i -= 1
        return (word[i] not in _VOWELS) != negate
    return True


def _consonant_flags(word: str) -> list[bool]:
    """``_is_consonant`` for every position, in one pass."""
    flags: list[bool] = []
    for i, ch in enumerate(word):
        if ch in _VOWELS:
            flags.append(False)
        elif ch == "y":
            flags.append(True if i == 0 else not flags[i - 1])
        else:
            flags.append(True)
    return flags


def _measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in ``[C](VC){m}[V]``."""
    return "".join("c" if c else "v" for c in _consonant_flags(stem)).count("vc")


def _has_positive_measure(stem: str) -> bool:
    return _measure(stem) > 0


def _measure_gt_1(stem: str) -> bool:
    return _measure(stem) > 1


def _contains_vowel(stem: str) -> bool:
    return not all(_consonant_flags(stem))


def _ends_double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _is_consonant(word, len(word) - 1)


def _ends_cvc(word: str) -> bool:
    """Porter's *o (consonant, vowel, consonant not w, x or y), and NLTK's two-letter one."""
    return (
        len(word) >= 3
        and _is_consonant(word, len(word) - 3)
        and not _is_consonant(word, len(word) - 2)
        and _is_consonant(word, len(word) - 1)
        and word[-1] not in ("w", "x", "y")
    ) or (len(word) == 2 and not _is_consonant(word, 0) and _is_consonant(word, 1))


def _replace_suffix(word: str, suffix: str, replacement: str) -> str:
    return word + replacement if suffix == "" else word[: -len(suffix)] + replacement


def _apply_rule_list(word: str, rules: Sequence[Rule]) -> str:
    """The first rule whose suffix ``word`` has decides: applied if its condition holds."""
    for suffix, replacement, condition in rules:
        if suffix == "*d" and _ends_double_consonant(word):
            stem = word[:-2]
            return stem + replacement if condition is None or condition(stem) else word
        if word.endswith(suffix):
            stem = _replace_suffix(word, suffix, "")
            return stem + replacement if condition is None or condition(stem) else word
    return word


def _step1a(word: str) -> str:
    if word.endswith("ies") and len(word) == 4:  # NLTK: "dies" -> "die", "flies" -> "fli"
        return _replace_suffix(word, "ies", "ie")
    return _apply_rule_list(word, [("sses", "ss", None), ("ies", "i", None),
                                   ("ss", "ss", None), ("s", "", None)])


def _step1b(word: str) -> str:
    if word.endswith("ied"):  # NLTK: "died" -> "die", "spied" -> "spi"
        return _replace_suffix(word, "ied", "ie" if len(word) == 4 else "i")
    if word.endswith("eed"):
        stem = _replace_suffix(word, "eed", "")
        return stem + "ee" if _measure(stem) > 0 else word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix):
            intermediate = _replace_suffix(word, suffix, "")
            if _contains_vowel(intermediate):
                break
    else:
        return word
    last = intermediate[-1]
    return _apply_rule_list(intermediate, [
        ("at", "ate", None), ("bl", "ble", None), ("iz", "ize", None),
        ("*d", last, lambda stem: last not in ("l", "s", "z")),
        ("", "e", lambda stem: _measure(stem) == 1 and _ends_cvc(stem)),
    ])


def _step1c(word: str) -> str:
    """NLTK: y -> i only after a consonant that is not the whole stem ("enjoy" stays)."""
    return _apply_rule_list(word, [
        ("y", "i", lambda stem: len(stem) > 1 and _is_consonant(stem, len(stem) - 1))])


def _step2(word: str) -> str:
    # NLTK applies ALLI -> AL first, and steps the result again
    if word.endswith("alli") and _has_positive_measure(_replace_suffix(word, "alli", "")):
        return _step2(_replace_suffix(word, "alli", "al"))
    positive = _has_positive_measure
    return _apply_rule_list(word, [
        ("ational", "ate", positive), ("tional", "tion", positive), ("enci", "ence", positive),
        ("anci", "ance", positive), ("izer", "ize", positive), ("bli", "ble", positive),
        ("alli", "al", positive), ("entli", "ent", positive), ("eli", "e", positive),
        ("ousli", "ous", positive), ("ization", "ize", positive), ("ation", "ate", positive),
        ("ator", "ate", positive), ("alism", "al", positive), ("iveness", "ive", positive),
        ("fulness", "ful", positive), ("ousness", "ous", positive), ("aliti", "al", positive),
        ("iviti", "ive", positive), ("biliti", "ble", positive), ("fulli", "ful", positive),
        # the "l" of logi stays with the stem, so "geo", "theo" work as "archaeo", "philo"
        ("logi", "log", lambda stem: _has_positive_measure(word[:-3])),
    ])


def _step3(word: str) -> str:
    positive = _has_positive_measure
    return _apply_rule_list(word, [
        ("icate", "ic", positive), ("ative", "", positive), ("alize", "al", positive),
        ("iciti", "ic", positive), ("ical", "ic", positive), ("ful", "", positive),
        ("ness", "", positive)])


def _step4(word: str) -> str:
    big = _measure_gt_1
    return _apply_rule_list(word, [
        ("al", "", big), ("ance", "", big), ("ence", "", big), ("er", "", big), ("ic", "", big),
        ("able", "", big), ("ible", "", big), ("ant", "", big), ("ement", "", big),
        ("ment", "", big), ("ent", "", big),
        ("ion", "", lambda stem: _measure(stem) > 1 and stem[-1] in ("s", "t")),
        ("ou", "", big), ("ism", "", big), ("ate", "", big), ("iti", "", big),
        ("ous", "", big), ("ive", "", big), ("ize", "", big)])


def _step5a(word: str) -> str:
    """(m>1) E ->, and (m=1 and not *o) E -> (both conditions tried, as NLTK does)."""
    if word.endswith("e"):
        stem = _replace_suffix(word, "e", "")
        if _measure(stem) > 1:
            return stem
        if _measure(stem) == 1 and not _ends_cvc(stem):
            return stem
    return word


def _step5b(word: str) -> str:
    return _apply_rule_list(word, [("ll", "l", lambda stem: _measure(word[:-1]) > 1)])
