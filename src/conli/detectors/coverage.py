"""Coverage detectors (seed 001): whether the response covers each point it was given.

``coverage_overlap`` is seed 001's ROUGE-1 recall (stemmed, stop words dropped);
``coverage_nli`` is the NLI machinery turned around, the response as premise and the
point as hypothesis, and decides where both ran. Without points both return nothing.
"""

from __future__ import annotations

from conli.agents.nli import Hypothesis, run_nli
from conli.config import Language
from conli.detectors.base import Detection, DetectionContext
from conli.models import CoverageVerdict, Judgement, PointCheck
from conli.ner.grounding import normalize
from conli.run.inputs import point_list
from conli.signals.lexical import best_sentence, recall

_COVERAGE: dict[str, CoverageVerdict] = {
    "supported": "covered", "hallucinated": "uncovered", "unverified": "unverified"}


class CoverageOverlap:
    """A point is covered when the response has ``coverage_recall`` of its content words."""

    name = "coverage_overlap"
    supersedes: frozenset[str] = frozenset()

    def detect(self, context: DetectionContext) -> Detection:
        """One check per point; no model call."""
        if not context.points:
            return Detection()
        threshold = context.deps.settings.coverage_recall
        sentences = [s.text for s in context.segments]
        checks = []
        for perspective, index, text in point_list(context.points):
            value = recall(text, context.response, context.language)
            sentence, _ = best_sentence(text, sentences, context.language)
            checks.append(PointCheck(
                detector=self.name, perspective=perspective, index=index, point=text,
                verdict="covered" if value >= threshold else "uncovered", score=value,
                sentence=sentence,
                reasoning=f"{value:.0%} of the point's content words are in the response"))
        return Detection(points=checks)


class CoverageNLI:
    """A point is covered when the response entails it (chain-of-thought NLI, swapped)."""

    name = "coverage_nli"
    supersedes: frozenset[str] = frozenset({CoverageOverlap.name})

    def detect(self, context: DetectionContext) -> Detection:
        """One NLI judgement per point, the response as the premise."""
        if not context.points:
            return Detection()
        listed = point_list(context.points)
        hypotheses = [Hypothesis(n, text) for n, (_, _, text) in enumerate(listed)]
        deps = context.deps
        judgements, calls = run_nli(deps.backend, context.response, hypotheses, kind="sentence",
                                    settings=deps.settings, detector=self.name,
                                    question=context.question)
        sentences = [s.text for s in context.segments]
        checks = [
            PointCheck(detector=self.name, perspective=perspective, index=index, point=text,
                       verdict=_COVERAGE[j.verdict], score=j.score,
                       sentence=_covering(j, text, sentences, context.language),
                       reasoning=j.reasoning,
                       error=j.error)
            for (perspective, index, text), j in zip(listed, judgements, strict=True)
        ]
        return Detection(points=checks, calls=calls)


def _covering(judgement: Judgement, point: str, sentences: list[str],
              language: Language) -> int | None:
    """The sentence holding the quoted evidence, else the one sharing most of the point."""
    if judgement.verdict != "supported":
        return None
    quoted = normalize(judgement.evidence).strip(" .,;:")
    if quoted:
        for index, sentence in enumerate(sentences):
            if quoted in normalize(sentence):
                return index
    return best_sentence(point, sentences, language)[0]
