"""The coverage fix: one added sentence for each point the response left out (seed 001).

The editor sees only the point, so the sentence can draw on nothing else. Each sentence
is then checked twice before it is added: against the source (like any rewrite) and
against its point (it must cover it). A sentence that fails either check is not added,
and the addition says why.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from conli.agents.nli import Hypothesis, run_nli
from conli.agents.structured import CallRecord, ask_structured
from conli.backends.base import Backend
from conli.config import Settings
from conli.models import PointAddition, PointResult
from conli.prompts import render

TEMPLATE = "cover_point.v1"


class PointSentence(BaseModel):
    """The editor's answer: one sentence stating the point."""

    sentence: str = Field(min_length=1, max_length=600)


def add_points(
    backend: Backend, source: str, text: str, uncovered: Sequence[PointResult],
    settings: Settings, *, question: str | None = None,
) -> tuple[str, list[PointAddition], list[CallRecord]]:
    """``text`` with a checked sentence appended for each uncovered point, and the record."""
    calls: list[CallRecord] = []
    drafts: list[tuple[PointResult, str | None, str | None]] = []
    for point in uncovered:
        prompt = render(TEMPLATE, point=point.point, spotlight=settings.spotlight)
        asked = ask_structured(
            backend, prompt.messages, PointSentence, step="cover", template=prompt.template,
            max_tokens=200, max_reasks=settings.max_reasks, temperature=settings.temperature)
        calls += asked.calls
        sentence = " ".join(asked.value.sentence.split()) if asked.value else None
        drafts.append((point, sentence, None if asked.value else asked.error))
    written = [(n, s) for n, (_, s, _) in enumerate(drafts) if s]
    grounded, grounded_calls = run_nli(
        backend, source, [Hypothesis(n, s) for n, s in written], kind="sentence",
        settings=settings, detector="verify_addition", question=question)
    calls += grounded_calls
    verdicts = {n: j for (n, _), j in zip(written, grounded, strict=True)}
    additions = []
    for n, (point, sentence, error) in enumerate(drafts):
        addition = PointAddition(perspective=point.perspective, index=point.index,
                                 point=point.point, sentence=sentence or "", added=False)
        if sentence is None:
            additions.append(addition.model_copy(update={"note": f"no sentence: {error}"}))
            continue
        covers, cover_calls = run_nli(backend, sentence, [Hypothesis(0, point.point)],
                                      kind="sentence", settings=settings,
                                      detector="verify_coverage")
        calls += cover_calls
        addition = addition.model_copy(update={
            "verdict": verdicts[n].verdict,
            "covers": {"supported": "covered", "hallucinated": "uncovered"}.get(
                covers[0].verdict, "unverified")})
        if addition.verdict == "supported" and addition.covers == "covered":
            additions.append(addition.model_copy(update={"added": True}))
        else:
            why = ("the source does not support it" if addition.verdict != "supported"
                   else "it does not state the point")
            additions.append(addition.model_copy(update={"note": f"not added: {why}"}))
    added = [a.sentence for a in additions if a.added]
    if added:
        text = text.rstrip() + " " + " ".join(added)
    return text, additions, calls
