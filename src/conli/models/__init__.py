"""Typed results: what a check returns, and what the models must answer.

Model answers are parsed into the ``*Answer`` models, never matched as substrings; each
puts its reasoning before its label or score so the model reasons first.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from conli.config import Language
from conli.models.base import (
    FLAGGED,
    RESULT_SCHEMA_VERSION,
    SCORE_METHODS,
    SCORE_PLACES,
    CoverageVerdict,
    Entity,
    EvidenceSpan,
    Look,
    NLILabel,
    Score,
    ScoreMethod,
    SourceSpan,
    Verdict,
    _from_schema_1,
)
from conli.models.coverage import (
    WORD_FLAG,
    Coverage,
    PerspectiveCoverage,
    PointCheck,
    PointResult,
    WordScore,
)
from conli.models.judge import (
    AuditSentence,
    JudgeAudit,
    JudgeError,
    JudgeFinding,
    JudgeResult,
    Severity,
)


class Judgement(BaseModel):
    """One detector's decision on one sentence (or a sentence with a tagged entity)."""

    detector: str = Field(description="the registered detector that made it, e.g. sentence_nli")
    hypothesis: str

    _schema_1 = model_validator(mode="before")(_from_schema_1)
    verdict: Verdict
    label: NLILabel | None = None
    evidence: str = ""
    evidence_in_source: bool | None = Field(
        default=None, description="the quoted evidence occurs in the source (None: nothing quoted)"
    )
    reasoning: str = ""
    entity: Entity | None = None
    error: str | None = None
    score: Score | None = Field(
        default=None,
        ge=0.0, le=1.0, description="P(entailment) read from the label token, if scored"
    )
    source_window: int | None = Field(
        default=None,
        ge=0, description="which window of a source too long for the context decided it"
    )
    looks: list[Look] | None = Field(
        default=None, description="several looks (nli_looks > 1): each chain's verdict and "
        "P(entailment), the greedy one first; most looks passing decides, ``score`` is the "
        "mean P(entailment)")
    template: str | None = Field(
        default=None, description="prompt template version, if one was used")
    final: bool = Field(
        default=False, description="decided for good: later detectors leave this sentence alone"
    )
    features: dict[str, float] = Field(
        default_factory=dict,
        description="what a trained detector (fused, signals) weighed, by name: for audits, "
        "and the rows its training reads back",
    )


class SentenceResult(BaseModel):
    """One segment of the response and, if it was checked, its merged verdict."""

    index: int
    text: str
    start: int = Field(description="offset in the response in code points (a Python index)")
    end: int
    start_utf16: int | None = Field(
        default=None, description="``start`` in UTF-16 code units (a JavaScript string index)")
    end_utf16: int | None = Field(default=None, description="``end`` in UTF-16 code units")
    checked: bool = Field(description="false for headings, list markers and fragments")
    verdict: Verdict | None = None
    detector: str | None = Field(
        default=None, description="the detector that decided a hallucination")

    _schema_1 = model_validator(mode="before")(_from_schema_1)
    reasons: list[str] = Field(default_factory=list)
    score: Score | None = Field(
        default=None, description="lowest P(entailment) over this sentence's scored checks"
    )
    score_method: ScoreMethod | None = Field(default=None, description="how ``score`` was made")
    entities: list[Entity] = Field(default_factory=list)
    judgements: list[Judgement] = Field(default_factory=list)
    evidence: list[EvidenceSpan] = Field(
        default_factory=list, description="the source spans its verdict quotes: the source "
        "(the chunk's index) and offsets within it; empty where none was quoted or found")


class SentenceChange(BaseModel):
    """A flagged sentence the mitigation agent rewrote or removed."""

    index: int
    action: Literal["rewrite", "remove"]
    before: str
    after: str
    rewrite_verdict: Verdict | None = Field(
        default=None,
        description="sentence-level NLI on the proposed rewrite (None: not re-checked)"
    )
    note: str | None = None


class PointAddition(BaseModel):
    """A sentence the coverage fix wrote for an uncovered point, and whether it was added."""

    perspective: str
    index: int
    point: str
    sentence: str
    added: bool
    verdict: Verdict | None = Field(
        default=None, description="the sentence checked against the source")
    covers: CoverageVerdict | None = Field(default=None, description="the sentence checked against "
                                           "the point")
    note: str | None = None


class Mitigation(BaseModel):
    """What the rewrite step did; ``status`` says if it ran, was skipped or failed."""

    status: Literal["rewritten", "nothing_flagged", "disabled", "failed", "partial"]
    changes: list[SentenceChange] = Field(default_factory=list)
    added: list[PointAddition] = Field(default_factory=list, description="--fix-coverage")
    error: str | None = None
    template: str | None = None


class CalibrationUse(BaseModel):
    """What a result records of the calibration that decided its verdicts."""

    file: str
    sha256: str
    method: Literal["threshold", "fused_weights"]
    flag_at: float | None = Field(
        default=None,
        description="a sentence is hallucinated when 1 - its score is at or above this")


class UsageTotals(BaseModel):
    """Tokens and calls, as the backend reported them."""

    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    failed_attempts: int = Field(
        default=0, description="model calls that failed and were retried (transient errors)"
    )
    prefill_seconds: float | None = Field(
        default=None,
        description="the model's prompt-reading time, where every call's server reports it"
    )
    decode_seconds: float | None = Field(
        default=None,
        description="the model's generation time, where every call's server reports it"
    )


class Note(BaseModel):
    """What an operator should know of this check: said, never left silent.

    ``skipped``: a step did not run on this text, and why. ``addressed``: a source holds
    text addressed to the checker (an instruction, a claimed verdict): which source, and
    the words; models never read those words (they are withheld), and the note by itself
    changes no verdict.
    """

    kind: Literal["skipped", "addressed"] = "skipped"
    step: str = Field(description="what did not run: a detector (entity_nli) or a signal "
                      "(novel_entities); or the step that found text addressed to the checker")
    reason: Literal["language", "injection"] = Field(
        description="language: it reads English only, and the texts are in another language; "
        "injection: text in a source speaks to the checker")
    language: Language = Field(description="the language the check read its texts in")
    message: str
    source: int | None = Field(default=None,
        ge=0, description="addressed: the source (chunk) index")
    source_name: str | None = Field(default=None,
        description="addressed: that source's name (a Document's), if it has one")
    text: str | None = Field(default=None,
        description="addressed: the words (at most 200 characters)")


class CheckResult(BaseModel):
    """The documented result object of ``conli check --json``."""

    schema_version: str = RESULT_SCHEMA_VERSION
    verdict: Verdict = Field(
        description="hallucinated if any sentence is; unverified if "
        "none is but some check could not complete"
    )
    support_score: Score | None = Field(
        default=None,
        description="lowest sentence score: a continuous P(grounded), for AUROC/thresholds"
    )
    supported_share: Score | None = Field(
        default=None, ge=0.0, le=1.0, description="supported checked sentences over checked "
        "sentences (faithfulness as supported claims over claims); None when none was checked")
    score_method: ScoreMethod | None = Field(
        default=None,
        description="how the scores were made: the least informative method among the "
        "checked sentences' (classifier, logprobs, looks, verdict)")
    passed: bool = Field(
        default=False,
        description="clears the user's bar: never when unverified; with a threshold, "
        "every checked sentence has a score at or above it; without one, verdict supported")
    threshold: float | None = Field(
        default=None,
        description="the support-score threshold `passed` was decided by (None: none)")
    backend: str
    model: str
    sentences: list[SentenceResult]
    refined_text: str
    mitigation: Mitigation
    judge_raw: JudgeResult | None = None
    judge_refined: JudgeResult | None = None
    usage: UsageTotals
    usage_by_step: dict[str, UsageTotals]
    timings: dict[str, float]
    templates: list[str]
    coverage: Coverage | None = None
    word_scores: list[WordScore] = Field(
        default_factory=list, description="content words of the response; 1 = not in the source")
    calibration: CalibrationUse | None = Field(
        default=None,
        description="the calibration file that decided the verdicts (conli calibrate)")
    language: Language = Field(
        default="en",
        description="the language the texts were read in: the setting, or the source's "
        "as detected (auto)")
    notes: list[Note] = Field(
        default_factory=list, description="steps that did not run on this text, and why")
    source_names: list[str | None] = Field(
        default_factory=list, description="each source chunk's name, in order, when a chunk "
        "was given as a named LangChain Document; empty when none is named")
    conli_version: str | None = Field(default=None,
        description="the conli that checked it (None in results written before it was "
        "recorded), for the audit of a run without the judge")
    commit: str | None = Field(default=None,
        description="the source commit, where conli runs from git")


class PairError(BaseModel):
    """Why one pair of a many-pair call has no result: the error, as the boundary names it."""

    type: str = Field(description="the error's class, e.g. EmptyInputError")
    kind: str = Field(description="its kind in the error table, e.g. unusable-input, backend")
    message: str


class PairResult(BaseModel):
    """One pair of ``conli.score`` / ``Checker.check_many``, at its input position.

    ``score`` is the result's ``support_score``; a pair that failed has no verdict, is not
    ``passed``, and says why in ``error``.
    """

    index: int = Field(ge=0, description="the pair's position in the input")
    score: Score | None = None
    verdict: Verdict | None = Field(default=None, description="None: the pair failed (see error)")
    passed: bool = False
    result: CheckResult | None = None
    error: PairError | None = None


__all__ = [
    "FLAGGED",
    "RESULT_SCHEMA_VERSION",
    "SCORE_METHODS",
    "SCORE_PLACES",
    "WORD_FLAG",
    "AuditSentence",
    "CalibrationUse",
    "CheckResult",
    "Coverage",
    "CoverageVerdict",
    "Entity",
    "EvidenceSpan",
    "JudgeAudit",
    "JudgeError",
    "JudgeFinding",
    "JudgeResult",
    "Judgement",
    "Look",
    "Mitigation",
    "NLILabel",
    "Note",
    "PairError",
    "PairResult",
    "PerspectiveCoverage",
    "PointAddition",
    "PointCheck",
    "PointResult",
    "Score",
    "ScoreMethod",
    "SentenceChange",
    "SentenceResult",
    "Severity",
    "SourceSpan",
    "UsageTotals",
    "Verdict",
    "WordScore",
]
