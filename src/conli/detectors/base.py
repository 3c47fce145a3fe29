"""The one contract every detector implements, and what it is given and gives back.

A detector reads the response's segments against the source and returns judgements that
name it. Detectors run in a configured order; each sees what the ones before it decided
(``prior``), so a cascade (entity checks after sentence checks, chain of thought after a
cheap classifier) is a detector that reads ``prior``. The graph merges every detector's
judgements by one rule (``graph.nodes.merge``): a judgement does not count where a detector
that supersedes its own judged too (``overruled``, for sentences and points alike).

Each counted judgement that fails a sentence gives it a reason. A detector words its own
(``WordsReasons``: a ``reason(judgement)`` method, optional); one that does not gets
``default_reason``, NLI's wording, with no label where it set none.

``Deps`` (the model, NER, spaCy, settings and detectors of a run) is defined here, beside
the context that carries it to the detectors; the graph passes it as LangGraph's runtime
context (``graph.deps``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from conli.agents.structured import CallRecord
from conli.backends.base import Backend
from conli.backends.endpoints import Endpoints
from conli.calibration import Applied
from conli.config import Language, Settings
from conli.models import Entity, Judgement, Note, PointCheck
from conli.ner import EntityRecognizer
from conli.run.inputs import SourceMap
from conli.text.segment import Segment


@dataclass(frozen=True)
class DetectionContext:
    """One response as detectors see it: texts, segments, earlier judgements, run deps."""

    source: str
    response: str
    question: str | None
    segments: list[Segment]
    prior: Mapping[int, list[Judgement]]
    deps: Deps
    points: Mapping[str, list[str]] | None = None  # what the response must cover, if given
    language: Language = "en"  # the texts' (``text.language.language_of``)
    source_map: SourceMap = field(default_factory=SourceMap)  # several sources: each's start

    @property
    def claims(self) -> list[Segment]:
        """The segments that carry a claim to check (``Segment.checked``)."""
        return [s for s in self.segments if s.checked]

    @property
    def unsettled(self) -> list[Segment]:
        """The claims no earlier detector decided for good: what is left to judge."""
        return [s for s in self.claims if not self.settled(s.index)]

    def judged(self, index: int, detector: str) -> list[Judgement]:
        """What ``detector`` decided about segment ``index`` (empty if it did not run)."""
        return [j for j in self.prior.get(index, []) if j.detector == detector]

    def settled(self, index: int) -> bool:
        """True when an earlier detector decided segment ``index`` for good (``final``)."""
        return any(j.final for j in self.prior.get(index, []))


@dataclass
class Detection:
    """A detector's output: judgements and entities by segment index, point checks, calls."""

    judgements: dict[int, list[Judgement]] = field(default_factory=dict)
    entities: dict[int, list[Entity]] = field(default_factory=dict)
    points: list[PointCheck] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)  # what it skipped on this text, and why


def skipped_for_language(step: str, language: Language, what: str) -> Note:
    """The note that ``step`` did not run because it reads English only (``what`` it is)."""
    return Note(step=step, reason="language", language=language,
                message=f"{what} reads English only, and the texts are in {language}: "
                        f"{step} was skipped (CONLI_LANGUAGE sets the language if it is wrong)")


def skipped_for_sentence(step: str, sentence: int, language: Language) -> Note:
    """The note that ``step`` read no names of one sentence: the NER does not read its language."""
    return Note(step=step, reason="language", language=language, sentence=sentence,
                message=f"sentence {sentence} is in {language}, which the spaCy NER does not "
                        f"read: {step} did not compare its names with the source (its "
                        "numbers and dates were compared; CONLI_LANGUAGE sets the language "
                        "if it is wrong)")


class Detector(Protocol):
    """Judges segments of a response; registered by ``name`` (``detectors.register``).

    ``supersedes``: detectors whose judgement of a segment this one's replaces in the
    merge when both judged it (a second opinion that is meant to decide). A detector may
    also word its own reasons (``WordsReasons``).
    """

    name: str
    supersedes: frozenset[str]

    def detect(self, context: DetectionContext) -> Detection:
        """Judge the segments this detector is for; raise ``BackendError`` if it cannot run."""
        ...


@runtime_checkable
class WordsReasons(Protocol):
    """A detector that words the reasons of its own judgements (optional to ``Detector``)."""

    def reason(self, judgement: Judgement) -> str:
        """The reason a sentence failed or went unchecked, as this detector says it."""
        ...


def reason_for(detector: object, judgement: Judgement) -> str:
    """``judgement``'s reason in its detector's words, else in ``default_reason``'s.

    ``detector``: the one that made it (None when the run does not hold it).
    """
    if isinstance(detector, WordsReasons):
        return detector.reason(judgement)
    return default_reason(judgement)


def default_reason(judgement: Judgement) -> str:
    """NLI's wording: ``[entity] label: reasoning Source: "quote"``, a missing label left out.

    A judgement with no label and nothing said is worded as flagged by its detector; one
    that could not be checked gives its error.
    """
    if judgement.verdict == "unverified":
        return f"could not be checked: {judgement.error}"
    subject = f"[{judgement.entity.text}] " if judgement.entity else ""
    label: str | None = judgement.label
    if label == "entailment" and judgement.verdict == "hallucinated":
        label = "entailment claimed without quoting the source"
    said = judgement.reasoning or ("" if label else f"flagged by {judgement.detector}")
    head = f"{label}: " if label else ""
    return f"{subject}{head}{said}{_evidence(judgement)}".strip()


def _evidence(judgement: Judgement) -> str:
    """The quoted evidence and whether the source holds it, as a reason's tail ("" if none)."""
    if not judgement.evidence:
        return ""
    where = "Source" if judgement.evidence_in_source else "Quoted, but not found in the source"
    return f' {where}: "{judgement.evidence}"'


def overruled(present: Iterable[str], supersedes: Mapping[str, frozenset[str]]) -> set[str]:
    """The detectors whose judgements do not count: superseded by one of those ``present``.

    ``present``: the detectors that judged one segment (or point); ``supersedes``: each
    detector's ``supersedes`` by name (a name missing there supersedes nothing).
    """
    return {name for detector in present for name in supersedes.get(detector, frozenset())}


@dataclass(frozen=True)
class Deps:
    """Run dependencies of the graph, and of every detector through ``DetectionContext``.

    ``settings`` are resolved (``nli_prompt`` is a concrete version, never ``auto``).
    """

    backend: Backend
    ner: EntityRecognizer
    nlp: Any  # spaCy Language, for sentence boundaries
    settings: Settings
    detectors: Mapping[str, Detector]
    calibration: Applied | None = None  # the user's fitted decision (conli calibrate)
    # the servers of detectors with their own (a checker's llm), shared by a checker's plans
    endpoints: Endpoints = field(default_factory=Endpoints)
