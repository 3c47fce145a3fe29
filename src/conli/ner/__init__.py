"""Named-entity recognition for the entity-level check, behind one small contract."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from conli.models import Entity

if TYPE_CHECKING:
    from conli.config import DetectionSettings


class EntityRecognizer(Protocol):
    """Finds entities of the configured categories; offsets index the given text."""

    name: str

    def entities(self, text: str) -> list[Entity]:
        """Entities in ``text``, in order, without duplicates of the same surface text."""
        ...

    def close(self) -> None:
        """Release the recognizer's connections, if any."""
        ...


def get_recognizer(settings: DetectionSettings, nlp: Any) -> EntityRecognizer:
    """Build the recognizer ``settings.ner`` names: ``spacy`` (uses ``nlp``) or ``azure``."""
    if settings.ner == "azure":
        from conli.ner.azure_ner import AzureRecognizer

        return AzureRecognizer(settings)
    from conli.ner.spacy_ner import SpacyRecognizer

    return SpacyRecognizer(nlp, settings.entity_categories)


__all__ = ["EntityRecognizer", "get_recognizer"]
