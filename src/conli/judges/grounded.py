"""The grounded judge: a 1-5 score computed from the detector's sentence verdicts.

Seed 003's rubric, applied to what detection found instead of asked of a model in one go.
Each checked sentence weighs what is wrong with it: a flagged sentence its severity
(``SEVERITY``: a contradiction 1.0, an unsupported addition 0.75, a minor detail 0.4),
a passed one its remaining doubt (1 - its support score). The text's evidence is the mean
over its checked sentences, and a monotone scale (``signals/grounded_scale.v1.json``)
turns it into a 1-5 score, so the score tracks how much of the text is wrong. The shipped
scale is hand-set: an isotonic scale fitted on seed 003's synthetic progressions
(``conli eval judge --write-scale``) lost to it leave-one-dataset-out, because the sets'
detection false-alarm rates differ too much for one set's fit to carry to another.

A contradiction is a sentence chain of thought labels ``contradiction``; a minor detail is
one that only the entity level flagged; anything else flagged, or a sentence that could not
be checked, is an unsupported addition (never fail open). The reasoning is written from
these findings, with no model call (``agents.reasoning.written``; ``judge_reasoning =
findings``, the default). With ``judge_reasoning = model`` the model writes it instead, in
one short generation quoting only sentences of the text (``check_quotes``), shown after the
findings' summary where it agrees with them; with no finding no call is made. Either way
the score is computed before the reasoning and never reads it: the same verdicts give the
same score, findings and errors (``reasoning_by`` says how the paragraph was made).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from conli.agents.nli_prompts import Layout, laid_out
from conli.agents.reasoning import WRITER, settled, written
from conli.agents.structured import CallRecord, ask_structured
from conli.backends.base import Backend, Capabilities
from conli.config import Settings
from conli.errors import ConfigError
from conli.judges.rubric import sentence_span
from conli.models import JudgeError, JudgeFinding, JudgeResult, SentenceResult
from conli.ner.grounding import normalize
from conli.prompts import render
from conli.prompts.boundary import Trusted

TEMPLATE = "judge_grounded.v1"  # its own prompt; SHARED opens as the NLI prompt does
SHARED_TEMPLATE = "judge_grounded.v2"
SCALE_ARTIFACT = Path(__file__).parent.parent / "signals" / "grounded_scale.v1.json"
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


@dataclass(frozen=True)
class Scale:
    """A monotone map from the evidence (0-1) to a 1-5 score: isotonic knots, interpolated."""

    version: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    training: dict[str, Any] = field(default_factory=dict, compare=False)

    def __call__(self, evidence: float) -> float:
        """The score for ``evidence``, interpolated between the knots, within 1-5."""
        import numpy as np

        return float(min(5.0, max(1.0, np.interp(evidence, self.x, self.y))))

    def to_json(self) -> dict[str, Any]:
        """The artifact's JSON form."""
        return {"version": self.version, "x": list(self.x), "y": list(self.y),
                "training": self.training}


@lru_cache(maxsize=4)
def load_scale(path: Path = SCALE_ARTIFACT) -> Scale:
    """The scale artifact at ``path``; ``ConfigError`` if it is unreadable or not monotone."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        scale = Scale(str(data["version"]), tuple(float(v) for v in data["x"]),
                      tuple(float(v) for v in data["y"]), dict(data.get("training", {})))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot read the grounded judge's scale {path}: {exc}") from exc
    if len(scale.x) != len(scale.y) or not scale.x or list(scale.x) != sorted(scale.x):
        raise ConfigError(f"the grounded judge's scale {path} is not a monotone map")
    return scale


def configured_scale(settings: Settings) -> Scale:
    """The scale ``settings`` name (``judge_scale``), else the shipped one."""
    return load_scale(settings.judge_scale or SCALE_ARTIFACT)


def nothing_checked(sentences: Sequence[SentenceResult]) -> str | None:
    """Why no judge may score the text: every sentence to check is ``unverified``; else None.

    A score, rubric or grounded, rests on checked sentences or is not given (never fail
    open); a text with nothing to check (headings only) is not this case.
    """
    checked = [s for s in sentences if s.checked]
    if not checked or any(s.verdict != "unverified" for s in checked):
        return None
    why = next((r for s in checked for r in s.reasons), "no detector judged it")
    return ("no sentence of the text could be checked against the source, so there is no "
            f"verdict to score from: {why}")


def unchecked_note(sentences: Sequence[SentenceResult]) -> str | None:
    """The note a score carries when some, not all, of its sentences could not be checked."""
    checked = [s for s in sentences if s.checked]
    unchecked = [s for s in checked if s.verdict == "unverified"]
    if not unchecked or len(unchecked) == len(checked):
        return None
    return (f"{len(unchecked)} of {len(checked)} sentences could not be checked against the "
            "source (unverified): the score rests on the others")


def evidence(sentences: Sequence[SentenceResult]) -> tuple[float, list[JudgeFinding]]:
    """How much of the text is wrong, 0-1 (the mean per checked sentence), and the findings.

    With nothing flagged it is 0: a text detection passed whole scores 5, as the rubric
    says; the passed sentences' doubt only ranks texts that do have findings.
    """
    checked = [s for s in sentences if s.checked]
    findings = {f.index: f for f in (finding(s) for s in checked) if f is not None}
    if not checked or not findings:
        return 0.0, []
    weights = [findings[s.index].weight if s.index in findings
               else 1.0 - s.score if s.score is not None else 0.0 for s in checked]
    return sum(weights) / len(checked), list(findings.values())


def grounded_score(sentences: Sequence[SentenceResult], scale: Scale | None = None
                   ) -> tuple[float, float, list[JudgeFinding]]:
    """The 1-5 score, the evidence it comes from, and the findings."""
    share, findings = evidence(sentences)
    return (scale or load_scale())(share), share, findings


def check_quotes(reasoning: str, text: str) -> None:
    """Raise ``ValueError`` if the reasoning quotes anything the judged text does not hold."""
    haystack = normalize(text)
    for match in _QUOTED.finditer(reasoning):
        quoted = normalize(match.group(1) or match.group(2)).strip(" .,;:")
        if quoted and quoted not in haystack:
            raise ValueError(f"the reasoning quotes text that is not in the judged text: "
                             f"{quoted[:80]!r}")


def errors_of(findings: Sequence[JudgeFinding], sentences: Sequence[SentenceResult],
              text: str) -> list[JudgeError]:
    """Each finding as an error tied to its sentence's offsets in ``text``."""
    by_index = {s.index: s for s in sentences}
    out = []
    for found in findings:
        span = sentence_span(found.sentence, text)
        if span is None:  # a sentence of the judged text always is; never shown untied
            continue
        lead = next((j for j in by_index[found.index].judgements
                     if j.verdict != "supported" and j.evidence_in_source), None)
        out.append(JudgeError(sentence=text[span[0]:span[1]], start=span[0], end=span[1],
                              problem=found.reason, source_quote=lead.evidence if lead else ""))
    return out


def reasoning_layout(settings: Settings, capabilities: Capabilities) -> Layout:
    """The reasoning prompt in ``prompt_layout``: v1 alone, or v2 opening as NLI's does."""
    return laid_out(TEMPLATE, SHARED_TEMPLATE, settings, capabilities)


def writer_name(settings: Settings, capabilities: Capabilities) -> str:
    """What writes the reasoning: ``WRITER`` (the findings, no prompt), else the prompt's version.

    The model writes it only with ``judge_reasoning = model``.
    """
    if settings.judge_reasoning == "findings":
        return WRITER
    return reasoning_layout(settings, capabilities).version


def template_name(settings: Settings, capabilities: Capabilities) -> str:
    """The version a grounded result records: the reasoning's writer, and the scale's."""
    return f"{writer_name(settings, capabilities)}+{configured_scale(settings).version}"


def grounded_judge(
    backend: Backend, source: str, text: str, sentences: Sequence[SentenceResult],
    settings: Settings,
) -> tuple[JudgeResult, list[CallRecord]]:
    """Score ``text`` from its checked ``sentences``; the reasoning is written after.

    From the findings (no call), or by the model with ``judge_reasoning = model``:
    ``source`` is then shown only in the shared layout, where the prompt opens as NLI's does.
    """
    scale = configured_scale(settings)
    template = template_name(settings, backend.capabilities)
    why = nothing_checked(sentences)
    if why:  # a score would rest on no verdict at all
        return JudgeResult(status="unverified", mode="grounded", error=why,
                           template=template), []
    score, share, findings = grounded_score(sentences, scale)
    errors = errors_of(findings, sentences, text)
    done = {"status": "scored", "score": score, "mode": "grounded", "scored_by": "verdicts",
            "share": share, "findings": findings, "errors": errors,
            "template": template}
    level = min(RUBRIC, key=lambda k: abs(k - score))
    paragraph = written(findings, sentences, score, RUBRIC[level])
    # nothing to explain (the model could only invent), or the findings write it (default)
    if not findings or settings.judge_reasoning == "findings":
        return JudgeResult(reasoning=paragraph, reasoning_by=WRITER, **done), []
    layout = reasoning_layout(settings, backend.capabilities)
    prompt = render(
        layout.template, sentences=[s.text for s in sentences], score=round(score, 1),
        rubric_line=Trusted(RUBRIC[level]), findings=[f.model_dump() for f in findings],
        source=source, spotlight=layout.spotlight, **layout.variables,
    )
    schema = GroundedAnswer.model_json_schema()
    schema["properties"]["reasoning"]["maxLength"] = REASONING_CHARS
    asked = ask_structured(
        backend, prompt.messages, GroundedAnswer, step="judge", template=layout.version,
        max_tokens=300, max_reasks=settings.max_reasks, temperature=settings.temperature,
        schema=schema, check=lambda answer: check_quotes(answer.reasoning, text),
    )
    if asked.value is None:  # the findings' own paragraph stands in for the prose
        return JudgeResult(reasoning=paragraph, reasoning_by=WRITER, reasoning_status="dropped",
                           error=f"reasoning dropped: {asked.error}", **done), asked.calls
    return JudgeResult(reasoning=settled(asked.value.reasoning, sentences, findings),
                       reasoning_by=layout.version, **done), asked.calls
