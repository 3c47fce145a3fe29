"""The words every result is made of: verdicts, scores, the schema version, entities, spans."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

Verdict = Literal["supported", "hallucinated", "unverified"]
# The verdicts an auditor sees flagged (the report's marks, and the calibration files they write)
FLAGGED: tuple[str, ...] = ("hallucinated", "unverified")
CoverageVerdict = Literal["covered", "uncovered", "unverified"]
NLILabel = Literal["entailment", "contradiction", "neutral"]
# How a sentence's ``score`` was made, from most to least informative: a detector's own
# probability (a trained classifier such as fused, or a plugin), the label token's
# log-probability, the share of sampled looks that passed it (a backend without
# log-probabilities, ``nli_looks`` > 1), or its verdict as 1 or 0 (such a backend with one
# look: it ranks only as the verdict does).
ScoreMethod = Literal["classifier", "logprobs", "looks", "verdict"]
SCORE_METHODS: tuple[ScoreMethod, ...] = ("classifier", "logprobs", "looks", "verdict")

# 2: judgements and sentences name the ``detector`` that made them (was ``level``).
# 3: ``coverage`` (points and their verdicts) and ``word_scores``; both optional.
# 4: judgements carry the ``features`` a trained detector weighed, and the result the
#    ``calibration`` that decided its verdicts (both optional); judge scores are numbers
#    (1-5, a distribution's mean where the backend gives one) with ``errors`` tied to
#    sentences and the ``dropped_errors`` count.
# 5: ``passed`` (the user's bar, ``Settings.threshold``) and the ``threshold`` it used.
# 6: the judge's ``audit`` record, ``bounded_from``, ``second_opinion``, ``review`` and the
#    ``emptied`` status; the result's ``language`` and ``notes`` (steps skipped, and why).
# 7: several sources: each sentence's ``evidence`` (the spans its verdict quotes, by source
#    index and offsets within that source); ``score_method`` (how ``score`` was made).
# 8: ``supported_share`` (supported checked sentences over checked sentences); scores are
#    rounded to ``SCORE_PLACES`` decimals (no float noise such as 0.9300000000000002);
#    ``notes`` of kind ``addressed`` (a source that speaks to the checker: ``source``,
#    ``text``); ``conli_version`` and ``commit``.
# 9: named chunks (LangChain ``Document`` sources): ``source_names`` of the result, and the
#    ``source_name`` of each evidence span, audit span and ``addressed`` note (all optional).
RESULT_SCHEMA_VERSION = "9"
SCORE_PLACES = 4


def _rounded(value: float) -> float:
    """A score as results carry it: rounded to ``SCORE_PLACES`` decimals."""
    return round(value, SCORE_PLACES)


# A score in a result: rounded where the result is built, so every front door shows the same.
Score = Annotated[float, AfterValidator(_rounded)]


# --- what a check returns ---------------------------------------------------------------


class Entity(BaseModel):
    """A named entity in a sentence; offsets index the whole response."""

    text: str
    label: str  # the NER backend's own label, e.g. spaCy's MONEY
    category: str  # our canonical category, e.g. Quantity
    start: int
    end: int
    # the source states it: word for word, or the same value written otherwise ("2.4
    # million" for "2,400,000", "14 June" for "June 14"); None: not looked up
    in_source: bool | None = None


_LEVEL_DETECTORS = {"sentence": "sentence_nli", "entity": "entity_nli"}


def _from_schema_1(data: Any) -> Any:
    """Results stored before schema 2 named the NLI ``level``; read them as detectors."""
    if not isinstance(data, dict) or "level" not in data or "detector" in data:
        return data
    level = data["level"]
    rest = {k: v for k, v in data.items() if k != "level"}
    if rest.get("template") == "none":
        rest["template"] = None
    return {**rest, "detector": _LEVEL_DETECTORS.get(level, level)}


class Look(BaseModel):
    """One chain of thought's answer when a claim is judged several times."""

    verdict: Verdict
    score: Score | None = Field(
        default=None, ge=0.0, le=1.0, description="its P(entailment), if read")


class SourceSpan(BaseModel):
    """Where words a verdict rests on stand in the sources: which source, and the offsets."""

    source: int = Field(default=0, ge=0, description="the source's index (0 for a single source)")
    source_name: str | None = Field(
        default=None, description="that source's name: a Document's id or named metadata key "
        "(None: unnamed)")
    start: int = Field(ge=0, description="offset in that source, in code points")
    end: int = Field(ge=0)
    text: str = Field(description="the source's own words there")


class EvidenceSpan(SourceSpan):
    """A source span a sentence's verdict quotes, and what it does to the sentence."""

    relation: Literal["supports", "contradicts"]
