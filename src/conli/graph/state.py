"""Graph state: the narrow input, the internal working state, and the result keys.

Keys that several nodes add to (judgements, entities, model calls, timings) have reducers,
so a node returns only what it adds. ``result_of`` reads the final state as a ``CheckResult``.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from conli.agents.structured import CallRecord, usage_of
from conli.backends.base import Backend
from conli.backends.calls import usage_by_step
from conli.config import Language
from conli.gate import response_verdict, supported_share
from conli.models import (
    SCORE_METHODS,
    CheckResult,
    Coverage,
    Entity,
    Judgement,
    JudgeResult,
    Mitigation,
    Note,
    PointCheck,
    SentenceResult,
    Verdict,
    WordScore,
)
from conli.run.inputs import SourceMap
from conli.text.segment import Segment
from conli.version import __version__, source_commit


def merge_timings(left: dict[str, float], right: dict[str, float]) -> dict[str, float]:
    """Add a node's seconds to the running totals."""
    merged = dict(left)
    for key, seconds in right.items():
        merged[key] = merged.get(key, 0.0) + seconds
    return merged


def add_judgements(
    left: dict[int, list[Judgement]], right: dict[int, list[Judgement]]
) -> dict[int, list[Judgement]]:
    """Append a detector's judgements to each segment's list."""
    merged = {index: list(found) for index, found in left.items()}
    for index, found in right.items():
        merged.setdefault(index, []).extend(found)
    return merged


def add_notes(left: list[Note], right: list[Note]) -> list[Note]:
    """Add a detector's notes, each said once (two detectors may skip the same signal)."""
    return left + [note for note in right if note not in left]


def add_entities(
    left: dict[int, list[Entity]], right: dict[int, list[Entity]]
) -> dict[int, list[Entity]]:
    """Entities found by a detector, by segment (a later finding replaces an earlier one)."""
    return {**left, **right}


class CheckInput(TypedDict, total=False):
    """What a caller hands the graph: ``source`` and ``response`` are required."""

    source: str
    response: str
    question: str | None
    points: dict[str, list[str]] | None
    source_map: SourceMap  # several sources: where each starts in ``source``


class CheckOutput(TypedDict, total=False):
    """What the graph hands back."""

    sentences: list[SentenceResult]
    coverage: Coverage | None
    word_scores: list[WordScore]
    refined_text: str
    mitigation: Mitigation
    judge_raw: JudgeResult | None
    judge_refined: JudgeResult | None
    calls: Annotated[list[CallRecord], operator.add]
    timings: Annotated[dict[str, float], merge_timings]
    language: Language  # the texts' language, decided once at the split
    notes: Annotated[list[Note], add_notes]


class CheckState(CheckInput, CheckOutput, total=False):
    """Everything the nodes read and write along the way."""

    segments: list[Segment]
    judgements: Annotated[dict[int, list[Judgement]], add_judgements]
    entities: Annotated[dict[int, list[Entity]], add_entities]
    point_checks: Annotated[list[PointCheck], operator.add]


class NodeOutput(TypedDict, total=False):
    """What ``check_node`` writes into a host app's state (it keeps the keys it declares)."""

    verdict: Verdict
    support_score: float | None
    sentences: list[SentenceResult]
    refined_text: str
    mitigation: Mitigation
    judge_raw: JudgeResult | None
    judge_refined: JudgeResult | None
    coverage: Coverage | None
    word_scores: list[WordScore]
    check_result: CheckResult  # the whole result, as `conli check --json` prints it
    messages: list[Any]  # a chat state's checked AI message, annotated (``hook.messages_update``)


def result_of(state: dict[str, Any], backend: Backend, seconds: float) -> CheckResult:
    """The check's result from the graph's final ``state``, run on ``backend`` in ``seconds``."""
    calls: list[CallRecord] = state.get("calls", [])
    sentences = state["sentences"]
    templates = sorted(
        {c.template for c in calls}
        | {j.template for s in sentences for j in s.judgements if j.template is not None}
    )
    scores = [s.score for s in sentences if s.score is not None]
    methods = {s.score_method for s in sentences if s.score_method is not None}
    return CheckResult(
        verdict=response_verdict(s.verdict for s in sentences),
        support_score=min(scores) if scores else None,
        supported_share=supported_share(sentences),
        score_method=max(methods, key=SCORE_METHODS.index) if methods else None,
        backend=backend.name,
        model=backend.model,
        sentences=sentences,
        refined_text=state["refined_text"],
        mitigation=state.get("mitigation") or Mitigation(status="disabled"),
        judge_raw=state.get("judge_raw"),
        judge_refined=state.get("judge_refined"),
        usage=usage_of(calls),
        usage_by_step=usage_by_step(calls),
        timings={**state.get("timings", {}), "total": seconds},
        templates=templates,
        coverage=state.get("coverage"),
        word_scores=state.get("word_scores", []),
        language=state.get("language", "en"),
        notes=state.get("notes", []),
        conli_version=__version__,
        commit=source_commit(),
    )
