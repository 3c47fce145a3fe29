"""The request bodies of ``conli serve``: what each route reads, and its OpenAPI example.

Each route takes only what it uses (an unknown field is a 422): ``/v1/judge`` the texts,
``/v1/check`` also the points to cover, ``/v1/rewrite`` also whether to fix coverage. The
points' content is validated where every front door validates it (``inputs.check_input``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

_SOURCE = "The Riverside Public Library opened in 1962 and is run by the city council."
_RESPONSE = "The library opened in 1962. It is run by a private charity."
_POINT_1, _POINT_2 = "The library opened in 1962.", "The city council runs the library."

PointsBody = list[str] | dict[str, list[str]]


class JudgeRequest(BaseModel):
    """A source document and the LLM response to score against it."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "source": _SOURCE, "response": _RESPONSE,
    }]})

    source: str = Field(description="the document the response must be faithful to")
    response: str = Field(description="the LLM answer to check, rewrite or judge")
    question: str | None = Field(
        None, description="the question the response answers, if any (read with each sentence)"
    )


class CheckRequest(JudgeRequest):
    """A source, the LLM response to check against it, and optionally the points to cover."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "source": _SOURCE, "response": _RESPONSE, "points": [_POINT_1, _POINT_2],
    }]})

    points: PointsBody | None = Field(
        None, description="what the response must cover (seed 001): a list of points, or "
        "{perspective: [points]}; each point is checked covered, uncovered or unverified",
    )


class RewriteRequest(CheckRequest):
    """A check whose unsupported sentences are rewritten, and optionally points added."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "source": _SOURCE, "response": _RESPONSE,
        "points": {"facts": [_POINT_1, _POINT_2]}, "fix_coverage": True,
    }]})

    fix_coverage: bool | None = Field(
        None, description="add one checked sentence for each uncovered point (default: the "
        "service's CONLI_FIX_COVERAGE)",
    )
