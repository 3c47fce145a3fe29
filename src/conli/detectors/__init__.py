"""Detectors registered by name, and the presets that name lists of them.

Adding a detector is one module with a class that has ``name``, ``supersedes`` and
``detect`` (``detectors.base.Detector``) and one ``register`` call, or an entry point in
the ``conli.detectors`` group of an installed package.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points

from conli.config import DetectionSettings
from conli.detectors.base import Detection, DetectionContext, Detector
from conli.detectors.coverage import CoverageNLI, CoverageOverlap
from conli.detectors.fused import FusedDetector
from conli.detectors.nli import EntityNLI, SentenceNLI
from conli.detectors.signals import SignalDetector
from conli.errors import ConfigError

Factory = Callable[[], Detector]

_REGISTRY: dict[str, Factory] = {
    SentenceNLI.name: SentenceNLI, EntityNLI.name: EntityNLI, SignalDetector.name: SignalDetector,
    FusedDetector.name: FusedDetector, CoverageOverlap.name: CoverageOverlap,
    CoverageNLI.name: CoverageNLI,
}
# what each preset runs on the points a check is given (nothing when none are)
_COVER = (CoverageOverlap.name, CoverageNLI.name)
PRESETS: dict[str, tuple[str, ...]] = {
    "cot": (SentenceNLI.name, EntityNLI.name, *_COVER),  # CoNLI: chain-of-thought NLI
    # the signal classifier alone: no generation (word overlap for points)
    "fast": (SignalDetector.name, CoverageOverlap.name),
    # the classifier first; NLI for what it does not settle, and NLI decides there
    "hybrid": (SignalDetector.name, SentenceNLI.name, EntityNLI.name, *_COVER),
    # NLI on every claim, then NLI's verdict and the reading weighed by one classifier
    "fused": (SentenceNLI.name, EntityNLI.name, FusedDetector.name, *_COVER),
}
_LOADED_ENTRY_POINTS = False


def register(name: str, factory: Factory) -> None:
    """Make ``factory()`` the detector called ``name`` (``--detector name``)."""
    _REGISTRY[name] = factory


def names() -> list[str]:
    """Every registered detector and preset name, and ``auto`` (resolved per backend)."""
    _load_entry_points()
    return sorted({*_REGISTRY, *PRESETS, "auto"})


def resolve(settings: DetectionSettings) -> list[str]:
    """The detectors ``settings`` ask for, presets expanded, in order, each once.

    ``entity_level`` off drops ``entity_nli``; ``sentence_level`` off (an ablation) drops
    ``sentence_nli``.
    """
    _load_entry_points()
    chosen: list[str] = []
    for name in settings.detectors:
        for member in PRESETS.get(name, (name,)):
            if member not in _REGISTRY:
                raise ConfigError(f"unknown detector {member!r}; known: {', '.join(names())}")
            if member not in chosen:
                chosen.append(member)
    dropped = {EntityNLI.name} if not settings.entity_level else set()
    dropped |= {SentenceNLI.name} if not settings.sentence_level else set()
    chosen = [name for name in chosen if name not in dropped]
    if not chosen:
        raise ConfigError("no detector left to run: check --detector and the level switches")
    return chosen


def build(names_: list[str]) -> dict[str, Detector]:
    """One instance of each named detector, by name."""
    return {name: _REGISTRY[name]() for name in names_}


def _load_entry_points() -> None:
    """Register detectors installed packages declare in the ``conli.detectors`` group."""
    global _LOADED_ENTRY_POINTS
    if _LOADED_ENTRY_POINTS:
        return
    _LOADED_ENTRY_POINTS = True
    for point in entry_points(group="conli.detectors"):
        _REGISTRY.setdefault(point.name, point.load())


__all__ = ["Detection", "DetectionContext", "Detector", "build", "names", "register", "resolve"]
