"""What the nodes need that is not state: the model, the NER, spaCy, detectors, settings.

Passed per run as LangGraph's runtime context, so one compiled graph serves any backend.
``settings`` are resolved (``nli_prompt`` is a concrete version, never ``auto``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conli.backends.base import Backend
from conli.calibration import Applied
from conli.config import Settings
from conli.detectors.base import Detector
from conli.ner import EntityRecognizer


@dataclass(frozen=True)
class Deps:
    """Run dependencies of the graph."""

    backend: Backend
    ner: EntityRecognizer
    nlp: Any  # spaCy Language, for sentence boundaries
    settings: Settings
    detectors: Mapping[str, Detector]
    calibration: Applied | None = None  # the user's fitted decision (conli calibrate)
