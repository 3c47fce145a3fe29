"""The service's error answers: RFC 9457 problems (``application/problem+json``).

Every error a route, the guard or the runner meets is answered here as a problem; conli's
own errors go through the one table, ``errors.boundary``, so each status is decided once.
Each problem carries the request's id (``request_id``), as the response header and log do.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from conli.config import Settings
from conli.errors import ConliError, boundary, validation_problems
from conli.service.stream import retry_seconds

log = logging.getLogger("conli.service.app")

PROBLEM = "application/problem+json"

# the id of the request being answered: set by the request-id middleware (``service.ops``)
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id",
                                                                        default=None)


class Problem(BaseModel):
    """An RFC 9457 problem detail."""

    type: str = Field(description="a URI naming the kind of problem")
    title: str
    status: int
    detail: str = ""
    instance: str | None = None
    request_id: str | None = Field(default=None, description="the X-Request-ID of the request")
    errors: list[dict[str, Any]] | None = Field(default=None, description="field errors, for 422")


class ProblemError(Exception):
    """Raised inside the app to answer with a problem document."""

    def __init__(self, status: int, slug: str, title: str, detail: str = "",
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail or title)
        self.status, self.slug, self.title, self.detail = status, slug, title, detail
        self.headers = headers or {}


def problem_body(status: int, slug: str, title: str, detail: str = "", *,
                 instance: str | None = None,
                 errors: list[dict[str, Any]] | None = None) -> Problem:
    """A problem document, stamped with the current request's id."""
    return Problem(type=f"urn:conli:problem:{slug}", title=title, status=status, detail=detail,
                   instance=instance, request_id=REQUEST_ID.get(), errors=errors)


def problem_response(status: int, slug: str, title: str, detail: str = "", *,
                     instance: str | None = None, headers: dict[str, str] | None = None,
                     errors: list[dict[str, Any]] | None = None) -> JSONResponse:
    """Build a ``JSONResponse`` carrying a problem document."""
    body = problem_body(status, slug, title, detail, instance=instance, errors=errors)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status,
                        media_type=PROBLEM, headers=headers)


def openai_error_body(message: str, *, kind: str, code: str | None = None,
                      param: str | None = None) -> dict[str, Any]:
    """An error in OpenAI's shape (``{"error": {...}}``), which OpenAI's SDKs read and raise."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def openai_error(status: int, message: str, *, kind: str, code: str | None = None,
                 param: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    """An OpenAI-shaped error answer, for the OpenAI-compatible routes (``conli.proxy``)."""
    return JSONResponse(openai_error_body(message, kind=kind, code=code, param=param),
                        status_code=status, headers=headers)


def error_problem(exc: BaseException, *, instance: str | None = None) -> Problem:
    """The problem for a failed check, through the one table (a batch item's error entry)."""
    answer = boundary(exc)
    detail = str(exc) if isinstance(exc, ConliError) else ""
    return problem_body(answer.http_status, answer.slug, answer.title, detail, instance=instance)


_DESCRIBED = {
    400: "unreadable request", 401: "missing or wrong API key",
    403: "open mode: loopback only; a browser request from another origin, or a foreign Host",
    413: "body, text, item or sentence count over the limit",
    422: "invalid body, option or unusable text",
    429: "too many requests in flight; retry after Retry-After seconds",
    502: "the model backend failed (e.g. rejected credentials) or its answer was unusable",
    503: "the model backend is unavailable or did not answer; retry after Retry-After",
    504: "the request took longer than the time limit, or the check ran past its deadline",
}


def problems(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problem answers a route may give."""
    return {code: {"model": Problem, "description": _DESCRIBED[code],
                   "content": {PROBLEM: {"schema": {"$ref": "#/components/schemas/Problem"}}}}
            for code in codes}


def install_error_handlers(app: FastAPI, settings: Settings) -> None:
    """Every error answered as a problem; conli's own through the one table in ``errors``."""

    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError) -> JSONResponse:
        return problem_response(exc.status, exc.slug, exc.title, exc.detail,
                                instance=request.url.path, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")),
                   "type": str(e.get("type", ""))} for e in exc.errors()]
        return problem_response(422, "invalid-body", "the request body is not valid",
                                validation_problems(errors, ""),
                                instance=request.url.path, errors=errors)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        return problem_response(exc.status_code, f"http-{exc.status_code}", str(exc.detail),
                                instance=request.url.path, headers=dict(exc.headers or {}))

    @app.exception_handler(ConliError)
    async def _conli(request: Request, exc: Exception) -> JSONResponse:
        answer = boundary(exc)
        headers = {}
        if answer.http_status == 503:
            headers["Retry-After"] = str(retry_seconds(exc, settings.service_retry_after_seconds))
        if answer.http_status == 500:
            log.error("configuration error on %s: %s", request.url.path, exc)
        return problem_response(answer.http_status, answer.slug, answer.title, str(exc),
                                instance=request.url.path, headers=headers)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return problem_response(500, "internal", "internal error", instance=request.url.path)
