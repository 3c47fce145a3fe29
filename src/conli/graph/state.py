"""Graph state: the narrow input, the internal working state, and the result keys.

List and dict keys that several nodes add to (model calls, timings) have reducers, so a
node returns only what it adds.
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from conli.agents.structured import CallRecord
from conli.models import Entity, Judgement, JudgeResult, Mitigation, SentenceResult
from conli.segment import Segment


def merge_timings(left: dict[str, float], right: dict[str, float]) -> dict[str, float]:
    """Add a node's seconds to the running totals."""
    merged = dict(left)
    for key, seconds in right.items():
        merged[key] = merged.get(key, 0.0) + seconds
    return merged


class CheckInput(TypedDict):
    """What a caller hands the graph."""

    source: str
    response: str


class CheckOutput(TypedDict, total=False):
    """What the graph hands back."""

    sentences: list[SentenceResult]
    refined_text: str
    mitigation: Mitigation
    judge_raw: JudgeResult | None
    judge_refined: JudgeResult | None
    calls: Annotated[list[CallRecord], operator.add]
    timings: Annotated[dict[str, float], merge_timings]


class CheckState(CheckInput, CheckOutput, total=False):
    """Everything the nodes read and write along the way."""

    segments: list[Segment]
    sentence_judgements: dict[int, Judgement]
    entities: dict[int, list[Entity]]
    entity_judgements: dict[int, list[Judgement]]
