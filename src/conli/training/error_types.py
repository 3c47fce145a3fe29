"""Errors of one type each, planted in faithful sentences: what a detector catches, by type.

Each item is one faithful sentence of a dev response, checked alone against its source,
and the same sentence with one error of a named type planted in it. Eight types, the
ones a fact checker meets (issue 64): a number changed (``number``), a name swapped for
another of its kind that the source states elsewhere (``name``), a date moved (``date``),
a negation added or removed (``negation``), a word turned into its opposite
(``antonym``), two names of one kind swapped inside the sentence (``reversed_role``),
two numbers of the sentence swapped, both stated by the source (``swapped_numbers``), and
a clause the source does not support added (``addition``). The controls are the
faithful sentences themselves, so recall and false alarms come from the same items.

Only ``number`` and ``date`` (where the new value is absent from the source) are errors
an entity rule can catch; the other six need a model's reading. Choices are seeded by the
example's id, so the same inputs give the same items.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from conli.text.segment import select_claims, split_response
from conli.training.example import Example
from conli.training.perturb import (
    SWAPPABLE,
    extrinsic_variant,
    negate,
    swap_date,
    swap_number,
)

TYPES = ("number", "name", "date", "negation", "antonym", "reversed_role", "swapped_numbers",
         "addition")
_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w,])|(?<![\w.,])\d+(?:\.\d+)?(?![\w,])")
# Pairs of opposites common in news and answers; each is tried both ways, whole words only.
ANTONYMS: tuple[tuple[str, str], ...] = (
    ("increased", "decreased"), ("increase", "decrease"), ("rose", "fell"), ("won", "lost"),
    ("win", "lose"), ("voted for", "voted against"), ("opened", "closed"),
    ("before", "after"), ("higher", "lower"), ("larger", "smaller"), ("largest", "smallest"),
    ("approved", "rejected"), ("allowed", "banned"), ("accepted", "refused"),
    ("earlier", "later"), ("north", "south"), ("east", "west"), ("younger", "older"),
    ("youngest", "oldest"), ("best", "worst"), ("better", "worse"), ("stronger", "weaker"),
    ("successful", "unsuccessful"), ("supported", "opposed"), ("bought", "sold"),
    ("arrived", "departed"), ("guilty", "innocent"), ("legal", "illegal"),
    ("public", "private"), ("male", "female"), ("positive", "negative"),
    ("cheap", "expensive"), ("inside", "outside"), ("always", "never"),
    ("majority", "minority"), ("hired", "fired"), ("gained", "lost"), ("agreed", "disagreed"),
    ("began", "ended"), ("started", "stopped"), ("entered", "left"), ("joined", "quit"),
    ("increasing", "decreasing"), ("rising", "falling"), ("most", "least"),
)
_OPPOSITE = {a: b for pair in ANTONYMS for a, b in (pair, pair[::-1])}
_WORD = re.compile(r"[A-Za-z]+")
_OPPOSITES = re.compile(r"\b(" + "|".join(sorted(map(re.escape, _OPPOSITE), key=len, reverse=True))
                        + r")\b", re.IGNORECASE)
_ROLES = ("PERSON", "ORG", "GPE")


@dataclass(frozen=True)
class Planted:
    """One faithful sentence and the same with an error of ``kind`` planted in it."""

    example: Example  # the dev example the sentence comes from
    sentence: str
    variant: str
    kind: str


def antonym(sentence: str, rng: random.Random) -> str | None:
    """One word turned into its opposite (``ANTONYMS``), keeping its case; None if none fits."""
    present = {m.group().lower() for m in _OPPOSITES.finditer(sentence)}
    words = [m for m in _OPPOSITES.finditer(sentence)  # "male or female" has no antonym error
             if _OPPOSITE[m.group().lower()] not in present]
    if not words:
        return None
    word = rng.choice(words)
    opposite = _OPPOSITE[word.group().lower()]
    if word.group()[0].isupper():
        opposite = opposite.capitalize()
    return sentence[: word.start()] + opposite + sentence[word.end():]


def reverse_roles(sentence: str, entities: Sequence[tuple[str, str]]) -> str | None:
    """Two different names of one kind in the sentence swapped (who did what to whom)."""
    for label in _ROLES:
        found = {t: m for t, lb in entities if lb == label
                 for m in [_whole(t, sentence)] if m is not None}
        names = list(found)
        if len(names) < 2 or names[0].lower() in names[1].lower() \
                or names[1].lower() in names[0].lower():
            continue
        a, b = sorted((found[names[0]], found[names[1]]), key=lambda m: m.start())
        between = {w.lower() for w in _WORD.findall(sentence[a.end(): b.start()])}
        if not between - {"and", "or", "nor"}:
            continue  # names side by side in a list: swapping them changes no role
        return (sentence[: a.start()] + b.group() + sentence[a.end(): b.start()] + a.group()
                + sentence[b.end():])
    return None


def _whole(name: str, sentence: str) -> re.Match[str] | None:
    """``name`` in ``sentence`` as whole words, not inside a hyphenated or longer word."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", sentence)


def swap_numbers(sentence: str, source: str) -> str | None:
    """The sentence's first two different numbers swapped, where the source states both."""
    found = [m for m in _NUMBER.finditer(sentence) if m.group() in source]
    values = list(dict.fromkeys(m.group() for m in found))
    if len(values) < 2:
        return None
    first = next(m for m in found if m.group() == values[0])
    second = next(m for m in found if m.group() == values[1])
    a, b = sorted((first, second), key=lambda m: m.start())
    return (sentence[: a.start()] + b.group() + sentence[a.end(): b.start()] + a.group()
            + sentence[b.end():])


def plant(kind: str, sentence: str, source: str, nlp: Any, rng: random.Random) -> str | None:
    """``sentence`` with one error of ``kind`` (``TYPES``), or None where it cannot take one.

    ``number`` and ``date`` keep only values the source never states (an entity rule's
    case); ``name`` takes another name of the kind from the source, so it is stated.
    """
    def entities() -> list[tuple[str, str]]:
        return [(e.text, e.label_) for e in nlp(sentence).ents]

    rules: dict[str, Callable[[], str | None]] = {
        "number": lambda: _absent(swap_number(sentence, rng), sentence, source),
        "date": lambda: _absent(swap_date(sentence, rng), sentence, source),
        "name": lambda: _swap_name(sentence, entities(), source, nlp, rng),
        "negation": lambda: negate(sentence, rng),
        "antonym": lambda: antonym(sentence, rng),
        "reversed_role": lambda: reverse_roles(sentence, entities()),
        "swapped_numbers": lambda: swap_numbers(sentence, source),
        "addition": lambda: extrinsic_variant(sentence, rng, source),
    }
    variant: str | None = rules[kind]()
    return variant if variant is not None and variant != sentence else None


def _swap_name(sentence: str, entities: list[tuple[str, str]], source: str, nlp: Any,
               rng: random.Random) -> str | None:
    """A name of the sentence (whole words) swapped for another of its kind the source states."""
    pool = [(e.text, e.label_) for e in nlp(source[:20_000]).ents]
    for text, label in entities:
        found = _whole(text, sentence)
        if label not in SWAPPABLE or found is None:
            continue
        others = sorted({t for t, lb in pool if lb == label and t.lower() not in sentence.lower()
                         and text.lower() not in t.lower() and t.lower() not in text.lower()})
        if others:
            new: str = rng.choice(others)
            return sentence[: found.start()] + new + sentence[found.end():]
    return None


def _absent(variant: str | None, sentence: str, source: str) -> str | None:
    """``variant`` only where the value it introduced is absent from the source."""
    if variant is None:
        return None
    new = set(_NUMBER.findall(variant)) - set(_NUMBER.findall(sentence))
    words = set(_WORD.findall(variant)) - set(_WORD.findall(sentence))
    return None if any(_whole(v, source) for v in new | words) else variant


def planted_errors(examples: Sequence[Example], nlp: Any, *, per_type: int, seed: int,
                   max_source_chars: int = 4000) -> dict[str, list[Planted]]:
    """Up to ``per_type`` planted sentences of each type, from faithful dev examples.

    Examples are taken in a seeded order, round-robin over their data sets; each sentence
    is used for one type at most, and each example for one item per type.
    """
    out: dict[str, list[Planted]] = {kind: [] for kind in TYPES}
    used: set[tuple[str, str]] = set()
    for example in _faithful(examples, seed, max_source_chars):
        rng = random.Random(f"{seed}:{example.id}")
        for sentence in _sentences(example, nlp):
            for kind in TYPES:
                if len(out[kind]) >= per_type or (example.id, kind) in used or \
                        any(p.sentence == sentence for p in out[kind]):
                    continue
                variant = plant(kind, sentence, example.source, nlp, rng)
                if variant is not None:
                    out[kind].append(Planted(example, sentence, variant, kind))
                    used.add((example.id, kind))
                    break
        if all(len(found) >= per_type for found in out.values()):
            break
    return out


def _faithful(examples: Sequence[Example], seed: int, max_chars: int) -> Iterator[Example]:
    """Faithful examples with short enough sources, shuffled per set, sets interleaved."""
    by_set: dict[str, list[Example]] = {}
    for example in examples:
        if not example.label and len(example.source) <= max_chars:
            by_set.setdefault(example.dataset, []).append(example)
    for found in by_set.values():
        random.Random(f"error-types-{seed}").shuffle(found)
    rows = list(by_set.values())
    for at in range(max((len(r) for r in rows), default=0)):
        for row in rows:
            if at < len(row):
                yield row[at]


def _sentences(example: Example, nlp: Any) -> list[str]:
    """The checked sentences of a faithful response, of at least six words."""
    return [s.text for s in select_claims(split_response(example.response, nlp))
            if s.checked and len(_WORD.findall(s.text)) >= 6]


def as_records(planted: Sequence[Planted]) -> list[dict[str, Any]]:
    """Each item as two rows of ``conli eval detect``'s JSONL: the error, then its control."""
    rows: list[dict[str, Any]] = []
    for number, item in enumerate(planted):
        base = {"source": item.example.source}
        if item.example.question:
            base["question"] = item.example.question
        rows.append({**base, "id": f"{item.kind}-{number}:{item.example.id}",
                     "response": item.variant, "label": True})
        rows.append({**base, "id": f"{item.kind}-{number}:{item.example.id}:control",
                     "response": item.sentence, "label": False})
    return rows
