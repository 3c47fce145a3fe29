"""One judged text, in the configured mode, with the record an auditor signs.

``judge_text`` is what every front door's score goes through (the graph's judge step):

- ``grounded`` (the default): the score comes from detection's sentence verdicts through
  the shipped scale (``grounded_judge``); the model writes only the reasoning.
- ``rubric``: the model reads the rubric and scores; its score is then *bounded by
  detection*: a text with a flagged sentence scores at most ``FLAGGED_BOUND`` whatever the
  model says (a note in the graded text cannot lift it), and the note names the sentence.
- ``both``: the grounded score, with the rubric judge's result beside it
  (``second_opinion``); a difference of ``REVIEW_GAP`` or more, or a rubric score the
  bound had to lower, marks the text for human review.

A text the rewrite emptied is ``emptied``, never a 5; one none of whose sentences could
be checked is ``unverified`` in every mode (no judge is asked), and one with some sentences
unverified says so in its note (and, in ``both``, in ``review``). Every result carries a
``JudgeAudit``: who scored it, with what, when, and per sentence its verdict, severity and
the source span that supports or contradicts it ("no_span_found" where none was).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from conli.agents import judge as rubric_judge
from conli.agents.grounded_judge import (
    finding,
    grounded_judge,
    nothing_checked,
    unchecked_note,
)
from conli.agents.grounded_judge import template_name as grounded_template
from conli.agents.judge import sentence_span
from conli.agents.structured import CallRecord
from conli.backends.base import Backend
from conli.config import Settings
from conli.models import AuditSentence, JudgeAudit, JudgeResult, SentenceResult, SourceSpan
from conli.version import __version__, source_commit

FLAGGED_BOUND = 4.0  # the rubric's "one detail cannot be verified": the most a flagged text gets
REVIEW_GAP = 2.0  # grounded and rubric this far apart: a human should look
EMPTIED = "the rewrite removed every sentence: nothing is left to score"


@dataclass(frozen=True)
class Provenance:
    """What made a score, named once per checker: backend, model, detectors, artifacts."""

    backend: str
    model: str
    detectors: list[str]
    artifacts: dict[str, str] = field(default_factory=dict)
    nli_prompt: str | None = None


def judge_text(backend: Backend, source: str, text: str, sentences: Sequence[SentenceResult],
               settings: Settings, provenance: Provenance
               ) -> tuple[JudgeResult, list[CallRecord]]:
    """Score ``text`` (whose checked ``sentences`` detection judged) in ``judge_mode``."""
    mode = settings.judge_mode
    if not text.strip():
        return _audited(emptied(settings, backend), text, sentences, provenance), []
    why = nothing_checked(sentences)
    if why:
        return _audited(unscored(settings, backend, why), text, sentences, provenance), []
    if mode == "rubric":
        result, calls = rubric(backend, source, text, sentences, settings)
    else:
        result, calls = grounded_judge(backend, source, text, sentences, settings)
        result = _noted(result, unchecked_note(sentences))
        if mode == "both":
            second, more = rubric(backend, source, text, sentences, settings)
            result = with_second_opinion(result, second, unchecked_note(sentences))
            calls = calls + more
    return _audited(result, text, sentences, provenance), calls


def emptied(settings: Settings, backend: Backend) -> JudgeResult:
    """The result for a text with nothing left in it: no score, and it says why."""
    if settings.judge_mode == "rubric":
        return JudgeResult(status="emptied", mode="rubric", reasoning=EMPTIED,
                           template=rubric_judge.template_name(settings, backend.capabilities))
    return JudgeResult(status="emptied", mode="grounded", reasoning=EMPTIED,
                       template=grounded_template(settings, backend.capabilities))


def unscored(settings: Settings, backend: Backend, why: str) -> JudgeResult:
    """The result for a text detection could not check at all: no score in any mode.

    No judge is asked: the rubric's 5 would rest on nothing checked. In ``both`` the
    reason is in ``review`` too, where a reader of the two judges looks.
    """
    if settings.judge_mode == "rubric":
        return JudgeResult(status="unverified", mode="rubric", error=why,
                           template=rubric_judge.template_name(settings, backend.capabilities))
    review = [f"no judge scored the text: {why}"] if settings.judge_mode == "both" else []
    return JudgeResult(status="unverified", mode="grounded", error=why, review=review,
                       template=grounded_template(settings, backend.capabilities))


def _noted(result: JudgeResult, note: str | None) -> JudgeResult:
    """``result`` with ``note`` added to its own, if it has a score the note qualifies."""
    if note is None or result.score is None:
        return result
    return result.model_copy(update={"note": "; ".join(n for n in (result.note, note) if n)})


def rubric(backend: Backend, source: str, text: str, sentences: Sequence[SentenceResult],
           settings: Settings) -> tuple[JudgeResult, list[CallRecord]]:
    """The rubric judge, its errors on verified sentences set aside, bounded by detection."""
    result, calls = rubric_judge.judge(backend, source, text, settings)
    verified = [s.text for s in sentences if s.checked and s.verdict == "supported"]
    result = rubric_judge.set_aside_verified(result, text, verified)
    return _noted(bounded(result, sentences), unchecked_note(sentences)), calls


def bounded(result: JudgeResult, sentences: Sequence[SentenceResult]) -> JudgeResult:
    """``result`` lowered to ``FLAGGED_BOUND`` where detection flagged a sentence.

    The text a judge grades cannot talk its score up past what detection found: the
    rubric's own score is kept in ``bounded_from`` and the note names the sentence.
    """
    flagged = [s for s in sentences if s.checked and s.verdict == "hallucinated"]
    if result.score is None or not flagged or result.score <= FLAGGED_BOUND:
        return result
    first = flagged[0].text if len(flagged[0].text) <= 80 else flagged[0].text[:77] + "..."
    more = f" and {len(flagged) - 1} more" if len(flagged) > 1 else ""
    note = (f"bounded at {FLAGGED_BOUND:g} from {result.score:.1f}: detection flagged "
            f'"{first}"{more}')
    notes = "; ".join(n for n in (result.note, note) if n)
    return result.model_copy(update={"score": FLAGGED_BOUND, "bounded_from": result.score,
                                     "note": notes})


def with_second_opinion(grounded: JudgeResult, second: JudgeResult,
                        unchecked: str | None = None) -> JudgeResult:
    """The grounded result with the rubric judge's beside it, and why a human should look.

    ``unchecked``: the note saying some sentences could not be checked, a reason too.
    """
    review = list(grounded.review)
    if grounded.status == "unverified":
        review.append(f"the grounded judge could not score the text: {grounded.error}")
    if unchecked:
        review.append(unchecked)
    if grounded.score is not None and second.score is not None:
        gap = abs(grounded.score - second.score)
        if gap >= REVIEW_GAP:
            review.append(f"the two judges differ by {gap:.1f}: grounded {grounded.score:.1f}, "
                          f"rubric {second.score:.1f}")
    elif second.status == "unverified":
        review.append(f"the rubric judge could not score the text: {second.error}")
    if second.bounded_from is not None:
        review.append(f"the rubric judge scored {second.bounded_from:.1f} although detection "
                      "flagged a sentence")
    return grounded.model_copy(update={"second_opinion": second, "review": review})


def _audited(result: JudgeResult, text: str, sentences: Sequence[SentenceResult],
             provenance: Provenance) -> JudgeResult:
    """``result`` with its audit record (the second opinion shares the text's)."""
    audit = audit_record(result.template, text, sentences, provenance)
    second = result.second_opinion
    if second is not None:
        second = second.model_copy(update={"audit": audit.model_copy(
            update={"template": second.template})})
    return result.model_copy(update={"audit": audit, "second_opinion": second})


def audit_record(template: str, text: str, sentences: Sequence[SentenceResult],
                 provenance: Provenance) -> JudgeAudit:
    """Who scored ``text``, with what and when, and each sentence as an auditor checks it."""
    cursor = 0
    rows = []
    for sentence in sentences:
        span = sentence_span(sentence.text, text[cursor:]) if sentence.text else None
        start, end = (cursor + span[0], cursor + span[1]) if span else (cursor, cursor)
        cursor = end
        rows.append(_audit_sentence(sentence, start, end))
    return JudgeAudit(
        judged_at=datetime.now(UTC).isoformat(timespec="seconds"), conli_version=__version__,
        commit=source_commit(), backend=provenance.backend, model=provenance.model,
        detectors=provenance.detectors, artifacts=provenance.artifacts,
        nli_prompt=provenance.nli_prompt, template=template, sentences=rows)


def _audit_sentence(sentence: SentenceResult, start: int, end: int) -> AuditSentence:
    found = finding(sentence)
    relation, span = _source_span(sentence)
    reason = found.reason if found else (sentence.reasons[0] if sentence.reasons else "")
    return AuditSentence(index=sentence.index, text=sentence.text, start=start, end=end,
                         checked=sentence.checked, verdict=sentence.verdict,
                         severity=found.severity if found else None, relation=relation,
                         source_span=span, reason=reason)


def _source_span(sentence: SentenceResult) -> tuple[str, SourceSpan | None]:
    """The source span the sentence's verdict rests on (``evidence``, found at merge).

    ``contradicts`` first, then ``supports``; "no_span_found" when the verdict quoted
    nothing the sources hold.
    """
    if not sentence.checked:
        return "not_checked", None
    for relation in ("contradicts", "supports"):
        for span in sentence.evidence:
            if span.relation == relation:
                return relation, SourceSpan(source=span.source, start=span.start,
                                            end=span.end, text=span.text)
    return "no_span_found", None
