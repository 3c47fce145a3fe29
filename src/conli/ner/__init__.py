"""Named-entity recognition for the entity-level check, behind one small contract."""

from __future__ import annotations

from typing import Protocol

from conli.models import Entity


class EntityRecognizer(Protocol):
    """Finds entities of the configured categories; offsets index the given text."""

    name: str

    def entities(self, text: str) -> list[Entity]:
        """Entities in ``text``, in order, without duplicates of the same surface text."""
        ...


__all__ = ["EntityRecognizer"]
