"""Synthetic errors planted in faithful responses, with a label for every sentence.

Seed 001 (§4.2) trains its classifier only on such errors; seed 003 (§3) makes them by
swapping entities, numbers and dates or negating (intrinsic), and by adding what the source
lacks (extrinsic). From each grounded example this plants one error, the kind rotating:

- ``intrinsic``: one sentence gets a number, date or entity swapped, or a negation flipped;
- ``foreign``: a sentence from another response of the same set is inserted;
- ``unsupported``: the source sentence a response sentence rests on (its best word
  overlap) is deleted from the source, so the sentence loses its support (seed 001).

Every other sentence keeps its faithful label. Rules and choices are seeded by the
example's id, so the same inputs give the same data.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from conli.text.segment import select_claims, split_response
from conli.training.example import Example
from conli.training.perturb import intrinsic_variant

KINDS = ("intrinsic", "foreign", "unsupported")
_WORD = re.compile(r"[a-z0-9]+")
_SOURCE_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")


def synthetic_examples(
    examples: Sequence[Example],
    nlp: Any,
    *,
    seed: int,
    per_example: int = 1,
    per_dataset: int | None = None,
) -> list[Example]:
    """Up to ``per_example`` planted errors for each grounded example, in input order.

    ``per_dataset`` caps how many each dataset contributes (the first ones in order).
    """
    grounded = [e for e in examples if not e.label]
    out: list[Example] = []
    counts: dict[str, int] = {}
    for number, example in enumerate(grounded):
        if per_dataset is not None and counts.get(example.dataset, 0) >= per_dataset:
            continue
        rng = random.Random(f"{seed}:{example.dataset}:{example.id}")
        others = [e for e in grounded
                  if e.dataset == example.dataset and e.source != example.source]
        made = 0
        for attempt in range(len(KINDS)):
            if made >= per_example:
                break
            kind = KINDS[(number + attempt) % len(KINDS)]
            planted = _plant(kind, example, others, nlp, rng)
            if planted is not None:
                out.append(planted)
                made += 1
        counts[example.dataset] = counts.get(example.dataset, 0) + made
    return out


def _plant(
    kind: str, example: Example, others: list[Example], nlp: Any, rng: random.Random
) -> Example | None:
    sentences = [s.text for s in select_claims(split_response(example.response, nlp)) if s.checked]
    if not sentences:
        return None
    target = rng.randrange(len(sentences))
    source, response = example.source, example.response
    labels = [False] * len(sentences)
    if kind == "intrinsic":
        entities = [(e.text, e.label_) for e in nlp(sentences[target]).ents]
        pool = [(e.text, e.label_) for e in nlp(source[:20_000]).ents]
        found = intrinsic_variant(sentences[target], rng, entities, pool)
        if found is None:
            return None
        response = response.replace(sentences[target], found[0], 1)
        sentences[target] = found[0]
    elif kind == "foreign":
        donors = [s.text for e in others for s in split_response(e.response, nlp)
                  if len(_WORD.findall(s.text.lower())) >= 5]
        if not donors:
            return None
        foreign = rng.choice(donors)
        anchor = response.index(sentences[target]) + len(sentences[target])
        response = f"{response[:anchor]} {foreign}{response[anchor:]}"
        sentences.insert(target + 1, foreign)
        labels.insert(target + 1, False)
        target += 1
    else:
        trimmed = _without_support(source, sentences[target])
        if trimmed is None:
            return None
        source = trimmed
    labels[target] = True
    return replace(
        example,
        id=f"{example.id}:synthetic-{kind}",
        source=source,
        response=response,
        label=True,
        sentence_labels=tuple(zip(sentences, labels, strict=True)),
        meta={**example.meta, "synthetic": kind, "from": example.id},
    )


def _without_support(source: str, sentence: str) -> str | None:
    """``source`` without the sentence that shares the most words with ``sentence``."""
    wanted = set(_WORD.findall(sentence.lower()))
    spans = [m for m in _SOURCE_SENTENCE.finditer(source) if m.group().strip()]
    if len(spans) < 2 or not wanted:
        return None
    best = max(spans, key=lambda m: len(wanted & set(_WORD.findall(m.group().lower()))))
    if not wanted & set(_WORD.findall(best.group().lower())):
        return None
    return (source[: best.start()] + source[best.end() :]).strip()
