"""Coverage (seed 001): word scores, points and their verdicts."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from conli.models.base import (
    CoverageVerdict,
    Score,
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
