"""spaCy NER (en_core_web_sm from its PyPI package), filtered to the configured categories."""

from __future__ import annotations

from typing import Any

from conli.models import Entity
from conli.ner.categories import SPACY_TO_CATEGORY, validate_categories


class SpacyRecognizer:
    """Entities from spaCy's statistical NER, labelled with our canonical categories."""

    name = "spacy"

    def __init__(self, nlp: Any, categories: list[str]) -> None:
        self._nlp = nlp
        self._categories = validate_categories(categories)

    def close(self) -> None:
        """Nothing to release: the spaCy pipeline is shared by the process."""

    def entities(self, text: str) -> list[Entity]:
        """Entities of the selected categories; the same surface text is kept once."""
        seen: set[str] = set()
        found = []
        for ent in self._nlp(text).ents:
            category = SPACY_TO_CATEGORY.get(ent.label_)
            surface = ent.text.strip()
            if category not in self._categories or not surface or surface in seen:
                continue
            seen.add(surface)
            found.append(
                Entity(
                    text=surface,
                    label=ent.label_,
                    category=category,
                    start=ent.start_char,
                    end=ent.start_char + len(surface),
                )
            )
        return found
