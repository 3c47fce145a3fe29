"""The names, numbers and dates of one claim, in whatever language it is written.

Numbers and dates need no NER: digits and the dates ``ner.values`` reads mean the same in
every script, so they are compared with the source in every language. Names need a NER
that reads the claim's language; where the configured one does not (the English spaCy
model on a German sentence), the claim's numbers and dates are still compared, and the
caller says, for that sentence, that its names were not (issue 61).
"""

from __future__ import annotations

from dataclasses import dataclass

from conli.config import Language
from conli.models import Entity
from conli.ner import EntityRecognizer
from conli.ner.values import value_spans
from conli.text.language import english_ner_runs


@dataclass(frozen=True)
class ClaimEntities:
    """A claim's entities, the language it was read in, and whether its names were read."""

    entities: list[Entity]
    language: Language
    names_read: bool


def reads_names(ner: str, language: Language) -> bool:
    """Whether the ``ner`` setting's recognizer reads names in ``language``."""
    return ner != "spacy" or english_ner_runs(language)


def claim_entities(text: str, recognizer: EntityRecognizer, ner: str,
                   language: Language) -> ClaimEntities:
    """``text``'s entities: the NER's where it reads ``language``, else its values alone."""
    if reads_names(ner, language):
        return ClaimEntities(recognizer.entities(text), language, True)
    return ClaimEntities(values_only(text), language, False)


def values_only(text: str) -> list[Entity]:
    """The dates and digit numbers of ``text`` as entities (label ``VALUE``)."""
    return [Entity(text=text[start:end], label="VALUE", category=category, start=start,
                   end=end) for start, end, category in value_spans(text)]
