"""The grounded judge: a 1-5 score computed from the detector's sentence verdicts.

Seed 003's rubric, applied to what detection found instead of asked of a model in one go:

- 5: no sentence flagged;
- 4: one minor detail flagged, nothing misleading;
- 3: several minor details, nothing misleading;
- 2: at least one misleading statement (a contradiction or an unsupported addition), but
  the weighted share of flagged sentences is at most one half;
- 1: more than half, by weight ("most or all of the text is wrong or unverifiable").

Weights (``SEVERITY``): a contradiction 1.0, an unsupported addition 0.75, a minor detail
0.4. A contradiction is a sentence chain of thought labels ``contradiction``; a minor
detail is one that only the entity level flagged (the sentence as a whole was entailed);
anything else flagged, or a sentence that could not be checked, is an unsupported
addition (never fail open). The model then writes the reasoning from these findings, in
one short generation, and must quote only sentences of the text (``check_quotes``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from conli.agents.structured import CallRecord, ask_structured
from conli.backends.base import Backend
from conli.config import Settings
from conli.models import JudgeFinding, JudgeResult, SentenceResult
from conli.ner.grounding import normalize
from conli.prompts import render

TEMPLATE = "judge_grounded.v1"
Severity = Literal["contradiction", "unsupported", "minor"]
SEVERITY: dict[Severity, float] = {"contradiction": 1.0, "unsupported": 0.75, "minor": 0.4}
RUBRIC = {
    5: "fully faithful: every piece of information can be verified in the source",
    4: "mostly faithful: one minor detail cannot be verified",
    3: "partly faithful: several details cannot be verified, none misleading",
    2: "partly unfaithful: at least one statement is wrong or unverifiable in a misleading way",
    1: "unfaithful: most or all of the text is wrong or cannot be verified",
}
REASONING_CHARS = 700
_QUOTED = re.compile(r'"([^"]{8,})"|“([^”]{8,})”')


class GroundedAnswer(BaseModel):
    """The one generation: reasoning only; the score is not the model's to give."""

    reasoning: str = Field(max_length=2000)


def finding(sentence: SentenceResult) -> JudgeFinding | None:
    """The sentence's severity, or None when it is supported or not a claim."""
    if not sentence.checked or sentence.verdict == "supported":
        return None
    if sentence.verdict == "unverified":
        severity: Severity = "unsupported"
        reason = "it could not be checked against the source"
    else:
        counted = [j for j in sentence.judgements if j.verdict == "hallucinated"]
        sentence_level = [j for j in counted if j.entity is None]
        if any(j.label == "contradiction" for j in sentence_level):
            severity = "contradiction"
        elif sentence_level:
            severity = "unsupported"
        else:
            severity = "minor"
        reason = sentence.reasons[0] if sentence.reasons else "not supported by the source"
    return JudgeFinding(index=sentence.index, sentence=sentence.text, severity=severity,
                        weight=SEVERITY[severity], reason=reason)


def grounded_score(sentences: Sequence[SentenceResult]) -> tuple[int, float, list[JudgeFinding]]:
    """The rubric score, the weighted share of flagged sentences, and the findings."""
    checked = [s for s in sentences if s.checked]
    findings = [f for f in (finding(s) for s in checked) if f is not None]
    share = sum(f.weight for f in findings) / len(checked) if checked else 0.0
    if not findings:
        return 5, share, findings
    if all(f.severity == "minor" for f in findings):
        return (4 if len(findings) == 1 else 3), share, findings
    return (2 if share <= 0.5 else 1), share, findings


def check_quotes(reasoning: str, text: str) -> None:
    """Raise ``ValueError`` if the reasoning quotes anything the judged text does not hold."""
    haystack = normalize(text)
    for match in _QUOTED.finditer(reasoning):
        quoted = normalize(match.group(1) or match.group(2)).strip(" .,;:")
        if quoted and quoted not in haystack:
            raise ValueError(f"the reasoning quotes text that is not in the judged text: "
                             f"{quoted[:80]!r}")


def grounded_judge(
    backend: Backend, text: str, sentences: Sequence[SentenceResult], settings: Settings
) -> tuple[JudgeResult, list[CallRecord]]:
    """Score ``text`` from its checked ``sentences``; the model writes only the reasoning."""
    score, share, findings = grounded_score(sentences)
    prompt = render(
        TEMPLATE, sentences=[s.text for s in sentences], score=score, rubric_line=RUBRIC[score],
        findings=[f.model_dump() for f in findings],
    )
    schema = GroundedAnswer.model_json_schema()
    schema["properties"]["reasoning"]["maxLength"] = REASONING_CHARS
    asked = ask_structured(
        backend, prompt.messages, GroundedAnswer, step="judge", template=TEMPLATE,
        max_tokens=300, max_reasks=settings.max_reasks, temperature=settings.temperature,
        schema=schema, check=lambda answer: check_quotes(answer.reasoning, text),
    )
    result = JudgeResult(
        status="scored", score=score, mode="grounded", share=share, findings=findings,
        reasoning=asked.value.reasoning if asked.value else "",
        reasoning_status="checked" if asked.value else "dropped",
        error=None if asked.value else f"reasoning dropped: {asked.error}",
        template=TEMPLATE,
    )
    return result, asked.calls
