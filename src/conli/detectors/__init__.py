"""Detectors registered by name, and the presets that name lists of them.

Adding a detector is one module with a class that has ``name``, ``supersedes`` and
``detect`` (``detectors.base.Detector``) and one ``register`` call, or an entry point in
the ``conli.detectors`` group of an installed package. A ``reason(judgement)`` method,
optional, words its reasons (``detectors.base.WordsReasons``).

A detector may declare its own settings: a pydantic model as the factory's ``options``
attribute (or ``register(..., options=Model)``). Its values come from
``Settings.detector_options[name]`` (``CONLI_DETECTOR_OPTIONS='{"name": {...}}'``), are
validated by that model, and the factory is called with the validated model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel, ValidationError

from conli.backends.base import Backend
from conli.config import DetectionSettings, Settings
from conli.detectors.base import Detection, DetectionContext, Detector
from conli.detectors.coverage import CoverageNLI, CoverageOverlap
from conli.detectors.fused import FusedDetector
from conli.detectors.guardian import GraniteGuardian
from conli.detectors.minicheck import MiniCheck
from conli.detectors.nli import EntityNLI, SentenceNLI
from conli.detectors.quick import QuickDetector
from conli.detectors.signals import SignalDetector
from conli.detectors.yesno import YesNo
from conli.errors import ConfigError, validation_problems

Factory = Callable[..., Detector]  # no argument, or its options model when it declares one

_REGISTRY: dict[str, Factory] = {}
_OPTIONS: dict[str, type[BaseModel]] = {}
BUILT_IN: tuple[type[Detector], ...] = (SentenceNLI, EntityNLI, SignalDetector, FusedDetector,
                                         CoverageOverlap, CoverageNLI, MiniCheck,
                                         GraniteGuardian, YesNo, QuickDetector)
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
    # one token a sentence over the cached source (word overlap for points)
    "yesno": (YesNo.name, CoverageOverlap.name),
    # the one-token check weighed with the reading by one classifier: no generation
    "quick": (YesNo.name, QuickDetector.name, CoverageOverlap.name),
}
# the detectors whose sentence scores are the backend's log-probabilities (none without);
# coverage detectors judge points, not sentences; the specialised checkers read their own
# server's (the run's backend unless their options name one)
SCORED_BY_LOGPROBS = frozenset({SentenceNLI.name, EntityNLI.name, *_COVER, MiniCheck.name,
                                GraniteGuardian.name, YesNo.name})
# the detectors that ask the NLI prompts (whose static prefix a run warms up)
ASKS_NLI = frozenset({SentenceNLI.name, EntityNLI.name, CoverageNLI.name})
# the specialised checkers, which may ask a server of their own (detector_options.NAME.llm)
CHECKERS = frozenset({MiniCheck.name, GraniteGuardian.name})
# the detectors that read the model's own forward pass (the embedded model serves it)
READERS = frozenset({SignalDetector.name, FusedDetector.name, QuickDetector.name})
_LOADED_ENTRY_POINTS = False


def register(name: str, factory: Factory, *, options: type[BaseModel] | None = None) -> None:
    """Make ``factory()`` the detector called ``name`` (``--detector name``).

    ``options`` (default: the factory's ``options`` attribute, if a pydantic model) are the
    detector's own settings: the factory is then called with them, validated.
    """
    _REGISTRY[name] = factory
    declared = options if options is not None else _declared(factory)
    if declared is None:
        _OPTIONS.pop(name, None)
    else:
        _OPTIONS[name] = declared


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


def build(names_: list[str],
          options: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Detector]:
    """One instance of each named detector, by name, each given its declared ``options``.

    ``options`` maps a detector's name to its settings (``Settings.detector_options``);
    settings for a detector that declares none, or that its model refuses, are a
    ``ConfigError`` naming them.
    """
    _load_entry_points()
    given = options or {}
    unknown = sorted(set(given) - set(_REGISTRY))
    if unknown:
        raise ConfigError(f"detector_options for unknown detector(s) {', '.join(unknown)}; "
                          f"known: {', '.join(names())}")
    return {name: _built(name, given.get(name)) for name in names_}


def _built(name: str, given: Mapping[str, Any] | None) -> Detector:
    """Detector ``name``, made with its options when it declares them."""
    model = _OPTIONS.get(name)
    if model is None:
        if given:
            raise ConfigError(f"detector {name!r} declares no settings, but detector_options "
                              f"gives it {', '.join(sorted(given))}")
        return _REGISTRY[name]()
    stray = sorted(set(given or {}) - set(model.model_fields))
    if stray and model.model_config.get("extra") != "allow":
        raise ConfigError(f"invalid setting: detector_options.{name}: unknown setting(s) "
                          f"{', '.join(stray)}; {name} takes {', '.join(model.model_fields)}")
    try:
        chosen = model.model_validate(dict(given or {}))
    except ValidationError as exc:
        raise ConfigError(f"invalid setting: detector_options.{name}: "
                          f"{validation_problems(exc.errors(), name)}") from exc
    return _REGISTRY[name](chosen)


def _declared(factory: Factory) -> type[BaseModel] | None:
    """The settings model a factory declares as its ``options`` attribute, if any."""
    model = getattr(factory, "options", None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _load_entry_points() -> None:
    """Register detectors installed packages declare in the ``conli.detectors`` group."""
    global _LOADED_ENTRY_POINTS
    if _LOADED_ENTRY_POINTS:
        return
    _LOADED_ENTRY_POINTS = True
    for point in entry_points(group="conli.detectors"):
        if point.name not in _REGISTRY:
            register(point.name, point.load())


for _builtin in BUILT_IN:  # through ``register``, as a plugin is: declared options are kept
    register(_builtin.name, _builtin)


__all__ = ["Detection", "DetectionContext", "Detector", "build", "names", "register", "resolve"]


def refuse_a_threshold_without_scores(settings: Settings, backend: Backend,
                                      names: list[str]) -> None:
    """A threshold needs scores that rank: ``ConfigError`` before any model call otherwise.

    The NLI detectors and the specialised checkers score a claim from the backend's
    log-probabilities; without them one answer's score is its verdict as 1 or 0
    (``score_method`` verdict), which a threshold could only repeat. Several NLI looks
    (their share) or any other detector's scores rank; looks do nothing for a checker.
    """
    # a checker with its own server reads that server's log-probabilities, not these
    own = {name for name, options in settings.detector_options.items() if options.get("llm")}
    on_backend = set(names) - own
    looks = settings.nli_looks > 1 and bool(on_backend & ASKS_NLI)
    if settings.threshold is None or backend.capabilities.logprobs or looks \
            or not on_backend or not on_backend <= SCORED_BY_LOGPROBS:
        return
    ways = ["use a backend that reports log-probabilities (local, openai, vllm)"]
    if on_backend & ASKS_NLI:
        ways.insert(0, "set CONLI_NLI_LOOKS=3 (the share of three sampled NLI verdicts, "
                       "score_method looks; three NLI calls a claim)")
    checkers = sorted(on_backend & CHECKERS)
    if checkers:
        ways.append(f"give {', '.join(checkers)} a server that reports them "
                    "(detector_options.NAME.llm)")
    raise ConfigError(
        f"--threshold needs a support score that ranks, and {backend.name} "
        f"({backend.model}) reports no log-probabilities: its only score would be each "
        f"sentence's verdict as 1 or 0. To rank: {'; '.join(ways)}; or gate on the verdict alone "
        "(--fail-on without --threshold)")


def refuse_a_reader_it_cannot_serve(settings: Settings, backend: Backend,
                                    names: list[str]) -> None:
    """``ConfigError`` before any model call when a detector reads what ``backend`` lacks.

    ``signals``, ``fused`` and ``quick`` read the model's forward pass (through the prompt
    cache under ``CONLI_READING=cache``); asked of a hosted model they would fail only
    after their NLI or one-token calls had been made and paid for.
    """
    readers = sorted(set(names) & READERS)
    capabilities = backend.capabilities
    cache = settings.reading == "cache"
    if not readers or (capabilities.scores_continuations if cache
                       else capabilities.hidden_states):
        return
    what = "score the response through the prompt cache (CONLI_READING=cache)" if cache \
        else "read the model's own forward pass (its hidden states)"
    raise ConfigError(
        f"{', '.join(readers)}: {what}, which {backend.name} ({backend.model}) does not "
        "serve; use the embedded model (--llm local) or --detector cot")
