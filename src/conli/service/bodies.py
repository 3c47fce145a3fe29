"""The request bodies of ``conli serve``: what each route reads, and its OpenAPI example.

Each route takes only what it uses (an unknown field is a 422): ``/v1/judge`` the texts,
``/v1/check`` also the points to cover, ``/v1/rewrite`` also whether to fix coverage. The
points' content is validated where every front door validates it (``inputs.check_input``).
``options`` are the few settings a caller may choose per request (an allow-list); any
other setting stays the operator's, and naming one is a 422 that says which.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from conli import detectors, judges

_SOURCE = "The Riverside Public Library opened in 1962 and is run by the city council."
_RESPONSE = "The library opened in 1962. It is run by a private charity."
_POINT_1, _POINT_2 = "The library opened in 1962.", "The city council runs the library."

PointsBody = list[str] | dict[str, list[str]]


class RequestOptions(BaseModel):
    """Settings one request may choose; every other setting is the operator's."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"detector": "cot", "threshold": 0.7, "judge_mode": "grounded"},
    ]})

    detector: str | None = Field(
        default=None, description="one detector or preset to run instead of the service's "
        "(cot, fast, hybrid, fused, auto, or a registered detector)")
    threshold: float | None = Field(
        default=None, ge=0.0, le=1.0, description="the support-score bar that decides `passed`")
    judge_mode: str | None = Field(
        default=None,
        description="how the judge scores: grounded (from the sentence verdicts), rubric "
        "(bounded by them), both (grounded, the rubric beside it), or a registered judge mode")

    @model_validator(mode="before")
    @classmethod
    def _only_allowed(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in data:
                if name not in cls.model_fields:
                    raise ValueError(f"option {name!r} cannot be set per request; the options "
                                     f"are {', '.join(cls.model_fields)}")
        return data

    @field_validator("detector")
    @classmethod
    def _known_detector(cls, name: str | None) -> str | None:
        if name is not None and name not in detectors.names():
            raise ValueError(f"unknown detector {name!r}; known: {', '.join(detectors.names())}")
        return name

    @field_validator("judge_mode")
    @classmethod
    def _known_judge_mode(cls, name: str | None) -> str | None:
        if name is not None and name not in judges.names():
            raise ValueError(f"unknown judge mode {name!r}; registered: "
                             f"{', '.join(judges.names())}")
        return name

    def settings_update(self) -> dict[str, object]:
        """The settings these options change (only those given)."""
        update: dict[str, object] = {}
        if self.detector is not None:
            update["detectors"] = [self.detector]
        if self.threshold is not None:
            update["threshold"] = self.threshold
        if self.judge_mode is not None:
            update["judge_mode"] = self.judge_mode
        return update


class TextsRequest(BaseModel):
    """What every route reads: the source, the question, and the per-request options."""

    model_config = ConfigDict(extra="forbid")

    source: str | list[str] = Field(
        description="the document the response must be faithful to, or a list of sources "
        "(a RAG app's retrieved chunks): each sentence's evidence names the source index")
    question: str | None = Field(
        default=None,
        description="the question the response answers, if any (read with each sentence)"
    )
    options: RequestOptions | None = Field(
        default=None, description="per-request settings, from an allow-list (others are a 422)")


class JudgeRequest(TextsRequest):
    """A source and the response (or several candidate responses) to score against it."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"source": _SOURCE, "response": _RESPONSE},
        {"source": _SOURCE, "responses": [_RESPONSE, "The library opened in 1962."]},
    ]})

    response: str | None = Field(
        default=None, description="the LLM answer to judge (or give `responses`)")
    responses: list[str] | None = Field(
        default=None, min_length=1, description="several candidate answers to judge against "
        "the one source: one result each, in order, as `conli judge --json` gives them")

    @model_validator(mode="after")
    def _one_or_the_other(self) -> JudgeRequest:
        if (self.response is None) == (self.responses is None):
            raise ValueError("give either response (one text) or responses (a list), not "
                             + ("both" if self.response is not None else "neither"))
        return self

    def texts(self) -> list[str]:
        """The responses to judge, in order."""
        return [self.response] if self.response is not None else list(self.responses or [])


class CheckRequest(TextsRequest):
    """A source, the LLM response to check against it, and optionally the points to cover."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "source": _SOURCE, "response": _RESPONSE, "points": [_POINT_1, _POINT_2],
    }]})

    response: str = Field(description="the LLM answer to check or rewrite")

    points: PointsBody | None = Field(
        default=None, description="what the response must cover (seed 001): a list of points, or "
        "{perspective: [points]}; each point is checked covered, uncovered or unverified",
    )


class RewriteRequest(CheckRequest):
    """A check whose unsupported sentences are rewritten, and optionally points added."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "source": _SOURCE, "response": _RESPONSE,
        "points": {"facts": [_POINT_1, _POINT_2]}, "fix_coverage": True,
    }]})

    fix_coverage: bool | None = Field(
        default=None, description="add one checked sentence for each uncovered point (default: the "
        "service's CONLI_FIX_COVERAGE)",
    )


class BatchRequest(BaseModel):
    """Many checks in one request, answered in input order (``POST /v1/check/batch``)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "items": [{"source": _SOURCE, "response": _RESPONSE},
                  {"source": _SOURCE, "response": "The library opened in 1962."}],
        "options": {"detector": "cot"},
    }]})

    items: list[CheckRequest] = Field(
        min_length=1, description="the checks to run; at most CONLI_SERVICE_BATCH_MAX_ITEMS "
        "(413 beyond)")
    options: RequestOptions | None = Field(
        default=None, description="options for every item; an item's own options win, one by one")
