"""The request bodies of ``conli serve``: what each route reads, and its OpenAPI example.

Each route takes only what it uses (an unknown field is a 422): ``/v1/judge`` the texts,
``/v1/check`` also the points to cover, ``/v1/rewrite`` also whether to fix coverage. The
points' content is validated where every front door validates it (``run.request.RunRequest``).
``options`` are ``RunOptions`` from the service's allow-list (``run.plan.DOOR_OPTIONS``); any
other setting stays the operator's, and naming one is a 422 that says which.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from conli import detectors, judges
from conli.errors import ConfigError
from conli.run.plan import RunOptions, allowed

_SOURCE = "The Riverside Public Library opened in 1962 and is run by the city council."
_RESPONSE = "The library opened in 1962. It is run by a private charity."
_POINT_1, _POINT_2 = "The library opened in 1962.", "The city council runs the library."

PointsBody = list[str] | dict[str, list[str]]


def _service_options(data: Any) -> Any:
    """Refuse, as a 422, an option the service does not take per request, or an unknown name.

    The options are ``RunOptions``; which of its fields a caller may choose here is the
    service's allow-list (``run.plan.DOOR_OPTIONS``); every other setting stays the operator's.
    """
    if not isinstance(data, Mapping):
        return data
    try:
        allowed("service", data)
    except ConfigError as exc:
        raise ValueError(str(exc)) from exc
    named, listed = data.get("detector"), data.get("detectors")
    chosen = [named] if isinstance(named, str) else listed if isinstance(listed, list) else []
    unknown = [name for name in chosen if isinstance(name, str) and name not in detectors.names()]
    if unknown:
        raise ValueError(f"unknown detector {unknown[0]!r}; known: {', '.join(detectors.names())}")
    mode = data.get("judge_mode")
    if isinstance(mode, str) and mode not in judges.names():
        raise ValueError(f"judge_mode: unknown judge mode {mode!r}; registered: "
                         f"{', '.join(judges.names())}")
    return data


# what a request may choose: ``detector`` (one name), ``threshold`` and ``judge_mode``
ServiceOptions = Annotated[RunOptions, BeforeValidator(_service_options)]


class DocumentChunk(BaseModel):
    """A source chunk as LangChain's ``Document`` dumps it: its text, metadata and id."""

    page_content: str = Field(description="the chunk's text, what the models read")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="the document's metadata; metadata.id, or the key "
        "CONLI_SOURCE_NAME_KEY names, names the chunk if it has no id")
    id: str | None = Field(default=None, description="the chunk's name in evidence and notes")


class TextsRequest(BaseModel):
    """What every route reads: the source, the question, and the per-request options."""

    model_config = ConfigDict(extra="forbid")

    source: str | list[str | DocumentChunk] = Field(
        description="the document the response must be faithful to, or a list of sources "
        "(a RAG app's retrieved chunks, as texts or LangChain Documents): each sentence's "
        "evidence names the source index, and a Document's name")
    question: str | None = Field(
        default=None,
        description="the question the response answers, if any (read with each sentence)"
    )
    options: ServiceOptions | None = Field(
        default=None, description="per-request settings, from an allow-list (others are a 422): "
        "detector (one name), threshold, judge_mode")


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
        "the one source: one result each, in order, as `conli judge --json` gives them; at "
        "most CONLI_SERVICE_BATCH_MAX_ITEMS (413 beyond)")

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
    options: ServiceOptions | None = Field(
        default=None, description="options for every item; an item's own options win, one by one")
