"""Rule-based errors planted in faithful text: the synthetic data of seed 003 and seed 001.

An *intrinsic* error contradicts the source: a number, a date or a named entity swapped
(for another of the same type from the source) or a negation added or removed. An
*extrinsic* error adds what the source does not support: a clause (``extrinsic_variant``),
or a sentence taken from another document. Every rule is seeded, so data built from the
same inputs is the same.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?![\w,])|(?<![\w.,])\d+(?:\.\d+)?(?![\w,])")
_YEAR = re.compile(r"\b(1[89]\d{2}|20\d{2})\b")
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_CALENDAR = re.compile(r"\b(" + "|".join(_MONTHS + _DAYS) + r")\b", re.IGNORECASE)
_AUX = re.compile(r"\b(is|are|was|were|has|have|had|will|can|could|would|should|did|does|do"
                  r"|must)\b(?!\s+not\b|n't)", re.IGNORECASE)
_NEGATED = re.compile(r"\b(is|are|was|were|has|have|had|will|can|could|would|should|did|does|do"
                      r"|must)\s+not\b|\b(is|are|was|were|has|have|had|could|would|should|did"
                      r"|does|do|must)n't\b", re.IGNORECASE)
SWAPPABLE = ("PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "PRODUCT", "WORK_OF_ART")
EXTRINSIC_CLAUSES = (
    "a decision that had been expected by most analysts",
    "which drew sharp criticism from several local residents",
    "at a ceremony attended by more than 300 people",
    "after months of private negotiations",
    "in a move that cost an estimated 2 million dollars",
    "which was first reported by a regional newspaper the following week",
    "despite warnings from two independent experts",
    "as part of a plan announced the previous spring",
)


# --- rule-based variants -----------------------------------------------------------------


def _match_case(word: str, like: str) -> str:
    if like.isupper():
        return word.upper()
    return word.lower() if like.islower() else word


def swap_number(sentence: str, rng: random.Random) -> str | None:
    """Change the first number that is not a year to a different value of the same form."""
    for match in _NUMBER.finditer(sentence):
        text = match.group()
        if _YEAR.fullmatch(text):
            continue
        if "." in text:
            whole, frac = text.split(".")
            new = f"{whole}.{frac[:-1]}{(int(frac[-1]) + rng.randint(1, 8)) % 10}"
        else:
            value = int(text.replace(",", ""))
            changed = value + rng.choice([1, 2, 3]) if value < 10 else int(value * rng.choice(
                [0.5, 0.75, 1.5, 2]))
            new = f"{changed:,}" if "," in text else str(changed)
        if new != text:
            return sentence[: match.start()] + new + sentence[match.end():]
    return None


def swap_date(sentence: str, rng: random.Random) -> str | None:
    """Move a month or weekday name to another one, or a year by 1-5 years."""
    calendar = _CALENDAR.search(sentence)
    if calendar:
        word = calendar.group()
        names = _MONTHS if word.capitalize() in _MONTHS else _DAYS
        others = [n for n in names if n.lower() != word.lower()]
        new = _match_case(rng.choice(others), word)
        return sentence[: calendar.start()] + new + sentence[calendar.end():]
    year = _YEAR.search(sentence)
    if year:
        new = str(int(year.group()) + rng.choice([-5, -3, -2, -1, 1, 2, 3, 5]))
        return sentence[: year.start()] + new + sentence[year.end():]
    return None


def swap_entity(
    sentence: str, entities: Sequence[tuple[str, str]], pool: Sequence[tuple[str, str]],
    rng: random.Random,
) -> str | None:
    """Replace a named entity with another of the same type taken from the source."""
    for text, label in entities:
        if label not in SWAPPABLE or text not in sentence:
            continue
        candidates = sorted({t for t, lb in pool if lb == label and t.lower() not in
                             sentence.lower() and text.lower() not in t.lower()})
        if candidates:
            return sentence.replace(text, rng.choice(candidates), 1)
    return None


def negate(sentence: str, rng: random.Random) -> str | None:
    """Remove an existing negation, or add ``not`` after the first auxiliary verb."""
    negated = _NEGATED.search(sentence)
    if negated:
        verb = negated.group(1) or negated.group(2)
        return sentence[: negated.start()] + verb + sentence[negated.end():]
    aux = _AUX.search(sentence)
    if aux:
        return sentence[: aux.end()] + " not" + sentence[aux.end():]
    return None


def intrinsic_variant(
    sentence: str, rng: random.Random, entities: Sequence[tuple[str, str]] = (),
    pool: Sequence[tuple[str, str]] = (),
) -> tuple[str, str] | None:
    """Return (variant, rule) contradicting the sentence, or None; rules in a seeded order."""
    rules: list[tuple[str, Callable[[], str | None]]] = [
        ("number", lambda: swap_number(sentence, rng)),
        ("date", lambda: swap_date(sentence, rng)),
        ("entity", lambda: swap_entity(sentence, entities, pool, rng)),
        ("negation", lambda: negate(sentence, rng)),
    ]
    rng.shuffle(rules)
    for name, rule in rules:
        variant = rule()
        if variant is not None and variant != sentence:
            return variant, name
    return None


def extrinsic_variant(sentence: str, rng: random.Random, source: str = "") -> str:
    """Return the sentence with an unsupported clause before its final punctuation."""
    clauses = [c for c in EXTRINSIC_CLAUSES if c not in source] or list(EXTRINSIC_CLAUSES)
    clause = rng.choice(clauses)
    body = sentence.rstrip()
    end = len(body)
    while end and body[end - 1] in ".!?\"'”’ ":
        end -= 1
    return f"{body[:end]}, {clause}{body[end:] or '.'}"
