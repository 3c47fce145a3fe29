"""What the judge returns: its findings, errors, audit record and score."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from conli.models.base import (
    Score,
    SourceSpan,
    Verdict,
)


class JudgeFinding(BaseModel):
    """A flagged sentence as the grounded judge weighs it."""

    index: int
    sentence: str
    severity: Severity
    weight: float = Field(ge=0.0, le=1.0)
    reason: str


Severity = Literal["contradiction", "unsupported", "minor"]


class AuditSentence(BaseModel):
    """One sentence of a judged text as an auditor checks it: verdict, why, and on what."""

    index: int
    text: str
    start: int = Field(ge=0, description="offset in the judged text, in code points")
    end: int = Field(ge=0)
    checked: bool
    verdict: Verdict | None
    severity: Severity | None = Field(
        default=None, description="how the grounded judge weighs a flag")
    relation: Literal["supports", "contradicts", "no_span_found", "not_checked"] = Field(
        description="what the source span does to the sentence; no_span_found: none was")
    source_span: SourceSpan | None = None
    reason: str = ""


class JudgeAudit(BaseModel):
    """What an auditor signs: how a score was made, by what, when, and on which sentences."""

    judged_at: str = Field(description="UTC time the score was made, ISO 8601")
    conli_version: str
    commit: str | None = Field(
        default=None, description="the source commit, where conli runs from git")
    backend: str
    model: str
    detectors: list[str]
    artifacts: dict[str, str] = Field(
        default_factory=dict, description="trained artifacts and calibration by detector")
    nli_prompt: str | None = None
    template: str = Field(description="the judge template (and the grounded judge's scale)")
    sentences: list[AuditSentence] = Field(default_factory=list)


class JudgeError(BaseModel):
    """One error a judge names, tied to the sentence of the judged text it is about.

    An error that names no sentence of the text, or quotes the source with words the
    source does not have, is never shown: it is dropped and counted (``dropped_errors``).
    """

    sentence: str = Field(description="the judged text's sentence, as it appears there")
    start: int = Field(ge=0, description="offset of the sentence in the judged text")
    end: int = Field(ge=0)
    problem: str
    source_quote: str = Field(default="", description="the source's words the error rests on, "
                              "checked to occur in the source (empty: the source lacks it)")


class JudgeResult(BaseModel):
    """A 1-5 score; ``score`` is None when the judge could not be completed.

    ``rubric``: the model reads the rubric and names the errors; where the backend gives
    log-probabilities the score is the mean of the score token's distribution over 1-5
    (``distribution``), else the generated token (``scored_by``, ``note`` say which).
    ``grounded``: the score is computed from the sentence verdicts (``findings``) through
    a monotone scale (``signals/grounded_scale.v1.json``); the reasoning is written from
    them (or, as an option, by the model: ``reasoning_by``). A rubric score is bounded by
    detection: no more than 4 where a sentence was flagged (``bounded_from`` keeps its own).
    ``emptied``: the rewrite removed every sentence, so nothing is left to score (never a
    5). ``errors`` are tied to sentences by offsets; ``dropped_errors`` counts the ones a
    judge named that could not be tied to the text or the source. ``reasoning_status``:
    ``checked`` (every quote in it is in the judged text), ``dropped`` (it quoted text that
    is not there: the score stands without it).
    """

    status: Literal["scored", "unverified", "emptied"]
    score: Score | None = Field(default=None, ge=1.0, le=5.0)
    mode: Literal["grounded", "rubric"] = "rubric"
    scored_by: Literal["distribution", "token", "verdicts"] | None = None
    distribution: dict[str, float] | None = Field(
        default=None, description="P of each score token 1-5 at the score position (rubric)")
    note: str | None = None
    reasoning: str = ""
    reasoning_status: Literal["checked", "dropped"] = "checked"
    reasoning_by: str | None = Field(
        default=None, description="grounded: how the reasoning was written: findings.v1 (from "
        "the findings, no model call) or the prompt's version (the model wrote it)")
    errors: list[JudgeError] = Field(default_factory=list)
    dropped_errors: int = Field(default=0, ge=0)
    share: Score | None = Field(
        default=None, ge=0.0, description="weighted share of flagged sentences")
    findings: list[JudgeFinding] = Field(default_factory=list)
    error: str | None = None
    template: str
    bounded_from: Score | None = Field(
        default=None, description="rubric: its own score, above what the detection findings allow")
    second_opinion: JudgeResult | None = Field(
        default=None,
        description="judge_mode both: the rubric judge's result beside the grounded one")
    review: list[str] = Field(
        default_factory=list, description="why a human should look at this text (empty: none)")
    audit: JudgeAudit | None = None
