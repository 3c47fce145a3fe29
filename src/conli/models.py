"""Typed results: what a check returns, and what the models must answer.

Model answers are parsed into the ``*Answer`` models, never matched as substrings; each
puts its reasoning before its label or score so the model reasons first.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, model_validator

from conli.config import Language

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
RESULT_SCHEMA_VERSION = "8"
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
    start: int = Field(ge=0, description="offset in that source, in code points")
    end: int = Field(ge=0)
    text: str = Field(description="the source's own words there")


class EvidenceSpan(SourceSpan):
    """A source span a sentence's verdict quotes, and what it does to the sentence."""

    relation: Literal["supports", "contradicts"]


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
    a monotone scale (``signals/grounded_scale.v1.json``); the model writes only the
    reasoning. A rubric score is bounded by detection: no more than 4 where a sentence was
    flagged (``bounded_from`` keeps its own). ``emptied``: the rewrite removed every
    sentence, so nothing is left to score (never a 5). ``errors`` are tied to sentences by
    offsets; ``dropped_errors`` counts the ones a judge
    named that could not be tied to the text or the source. ``reasoning_status``:
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


WORD_FLAG = 0.5  # a word scoring at least this is shown as unsupported (or, in a point, missing)


class WordScore(BaseModel):
    """A content word and how unsupported (response) or uncovered (point) it is, 0-1."""

    text: str
    start: int
    end: int
    score: Score = Field(ge=0.0, le=1.0)
    method: Literal["lexical", "semantic"]


class PointCheck(BaseModel):
    """One coverage detector's judgement of one point."""

    detector: str
    perspective: str
    index: int = Field(ge=0)
    point: str
    verdict: CoverageVerdict
    score: Score | None = Field(default=None, ge=0.0, le=1.0, description="how covered, 0-1")
    sentence: int | None = Field(default=None, description="the response sentence that covers it")
    reasoning: str = ""
    error: str | None = None


class PointResult(BaseModel):
    """A point after every coverage detector: covered only if every counted check says so."""

    perspective: str
    index: int
    point: str
    verdict: CoverageVerdict
    score: Score | None = None
    sentence: int | None = None
    checks: list[PointCheck] = Field(default_factory=list)
    words: list[WordScore] = Field(default_factory=list, description="1 = not in the response")


class PerspectiveCoverage(BaseModel):
    """A perspective's coverage: its worst point (seed 001 takes the minimum)."""

    name: str
    score: Score | None
    verdict: CoverageVerdict


class Coverage(BaseModel):
    """What the response covers of the points it was given, or of its source."""

    verdict: CoverageVerdict | None = Field(
        default=None, description="uncovered = a coverage error (a point is missing); None without "
        "points: a summary is not expected to cover every source sentence")
    score: Score | None = Field(
        default=None, description="minimum over perspectives; without points, the share of the "
        "source's content words the response uses (ROUGE-1 recall)")
    points: list[PointResult] = Field(default_factory=list)
    perspectives: list[PerspectiveCoverage] = Field(default_factory=list)


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
    source: int | None = Field(None, ge=0, description="addressed: the source (chunk) index")
    text: str | None = Field(None, description="addressed: the words (at most 200 characters)")


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
    conli_version: str | None = Field(
        None, description="the conli that checked it (None in results written before it was "
        "recorded), for the audit of a run without the judge")
    commit: str | None = Field(None, description="the source commit, where conli runs from git")


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
