"""The record an auditor signs with every judged text: who scored it, with what, and when.

Per sentence: its verdict, its severity (``judges.grounded.finding``) and the source span
that supports or contradicts it ("no_span_found" where none was).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from conli.judges.grounded import finding
from conli.judges.rubric import sentence_span
from conli.models import AuditSentence, JudgeAudit, JudgeResult, SentenceResult, SourceSpan
from conli.version import __version__, source_commit


@dataclass(frozen=True)
class Provenance:
    """What made a score, named once per checker: backend, model, detectors, artifacts."""

    backend: str
    model: str
    detectors: list[str]
    artifacts: dict[str, str] = field(default_factory=dict)
    nli_prompt: str | None = None


def audited(result: JudgeResult, text: str, sentences: Sequence[SentenceResult],
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
                return relation, SourceSpan(source=span.source, source_name=span.source_name,
                                            start=span.start, end=span.end, text=span.text)
    return "no_span_found", None
