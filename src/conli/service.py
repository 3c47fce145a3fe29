"""``conli serve``: check, rewrite and judge over HTTP (FastAPI + uvicorn, the [service] extra).

The checker (and its compiled graph) is built once in ``create_app``; each request runs in
a worker thread, with a per-request timeout and a concurrency limit that answers 429 with
``Retry-After`` when full. Every error is an RFC 9457 problem (``application/problem+json``);
a body the API cannot use is a 4xx, never a 500. ``/v1/check/stream`` reads an NDJSON body
while it arrives and answers one NDJSON line per sentence as each completes (``streaming``).
"""

import argparse
import asyncio
import hmac
import ipaddress
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from pydantic import BaseModel, Field

from conli import __version__
from conli.backends import get_backend
from conli.backends.base import Backend
from conli.config import Settings
from conli.errors import ConfigError, ConliError, InputTooLargeError, boundary
from conli.frontdoor import JudgeOnlyResult, Mode, judge_only, mode_settings, session_settings
from conli.inputs import check_input
from conli.models import CheckResult
from conli.pipeline import Checker
from conli.service_bodies import CheckRequest, JudgeRequest, RewriteRequest
from conli.stream_http import (
    Relay,
    StreamChunk,
    StreamClosed,
    StreamLine,
    StreamOpening,
    ndjson_lines,
    read_request,
    retry_seconds,
)
from conli.streaming import NDJSON, Events

_MISSING_EXTRA: str | None = None
try:
    import uvicorn
    from fastapi import FastAPI, Request, Security
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from fastapi.security import APIKeyHeader
    from starlette.exceptions import HTTPException
    from starlette.requests import ClientDisconnect
    from starlette.responses import Response, StreamingResponse
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - the [service] extra is not installed
    _MISSING_EXTRA = str(exc)

log = logging.getLogger("conli.service")

PROBLEM = "application/problem+json"
API_KEY_HEADER = "X-API-Key"
STREAM_PATH = "/v1/check/stream"


class Problem(BaseModel):
    """An RFC 9457 problem detail."""

    type: str = Field(description="a URI naming the kind of problem")
    title: str
    status: int
    detail: str = ""
    instance: str | None = None
    errors: list[dict[str, Any]] | None = Field(None, description="field errors, for 422")


class Health(BaseModel):
    """Liveness: the service is up and which model answers."""

    status: str = "ok"
    backend: str
    model: str
    version: str = __version__


class ProblemError(Exception):
    """Raised inside the app to answer with a problem document."""

    def __init__(self, status: int, slug: str, title: str, detail: str = "",
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail or title)
        self.status, self.slug, self.title, self.detail = status, slug, title, detail
        self.headers = headers or {}


def problem_response(status: int, slug: str, title: str, detail: str = "", *,
                     instance: str | None = None, headers: dict[str, str] | None = None,
                     errors: list[dict[str, Any]] | None = None) -> "JSONResponse":
    """Build a ``JSONResponse`` carrying a problem document."""
    body = Problem(type=f"urn:conli:problem:{slug}", title=title, status=status, detail=detail,
                   instance=instance, errors=errors)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status,
                        media_type=PROBLEM, headers=headers)


def _problems(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problem answers a route may give."""
    described = {
        400: "unreadable request", 401: "missing or wrong API key", 403: "open mode: loopback only",
        413: "body, text or sentence count over the limit", 422: "invalid body or unusable text",
        429: "too many requests in flight; retry after Retry-After seconds",
        502: "the model backend failed (e.g. rejected credentials) or its answer was unusable",
        503: "the model backend is unavailable or did not answer; retry after Retry-After",
        504: "the request took longer than the time limit, or the check ran past its deadline",
    }
    return {code: {"model": Problem, "description": described[code],
                   "content": {PROBLEM: {"schema": {"$ref": "#/components/schemas/Problem"}}}}
            for code in codes}


def _is_loopback(host: str | None) -> bool:
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class _Guard:
    """ASGI middleware: API key (or loopback in open mode) on /v1, and the body-size limit.

    It runs before any body parsing, so an unauthenticated client learns nothing and an
    oversized body is refused without being held in memory.
    """

    def __init__(self, app: "ASGIApp", *, keys: list[str], open_access: bool,
                 max_body: int) -> None:
        self.app, self.keys, self.open_access, self.max_body = app, keys, open_access, max_body

    async def __call__(self, scope: "Scope", receive: "Receive", send: "Send") -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if scope["path"] == STREAM_PATH:  # read by the route as it arrives, counted here
            await self.app(scope, self._capped(receive), send)
            return
        body, refusal = await self._read_body(scope, receive)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        replayed = False

        async def replay() -> "Message":
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _refusal(self, scope: "Scope") -> "JSONResponse | None":
        path = scope["path"]
        if path.startswith("/v1/"):
            if self.open_access and not _is_loopback((scope.get("client") or (None,))[0]):
                return problem_response(403, "forbidden", "open mode serves loopback only",
                                        instance=path)
            if self.keys:
                given = dict(scope["headers"]).get(API_KEY_HEADER.lower().encode())
                if not given or not any(
                    hmac.compare_digest(given, key.encode()) for key in self.keys
                ):
                    return problem_response(401, "unauthorized", "missing or wrong API key",
                                            f"send a valid key in the {API_KEY_HEADER} header",
                                            instance=path)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None:
            if not length.isdigit():
                return problem_response(400, "bad-request", "invalid Content-Length", instance=path)
            if int(length) > self.max_body:
                return self._too_large(path)
        return None

    async def _read_body(
        self, scope: "Scope", receive: "Receive"
    ) -> tuple[bytes, "JSONResponse | None"]:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return b"", self._too_large(scope["path"])
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks), None

    def _capped(self, receive: "Receive") -> "Receive":
        """``receive`` that fails (413) once the body passes the limit."""
        size = 0

        async def capped() -> "Message":
            nonlocal size
            message = await receive()
            size += len(message.get("body", b"")) if message["type"] == "http.request" else 0
            if size > self.max_body:
                raise InputTooLargeError(f"the request body is over the limit of "
                                         f"{self.max_body:,} bytes")
            return message

        return capped

    def _too_large(self, path: str) -> "JSONResponse":
        return problem_response(413, "too-large", "request body too large",
                                f"the limit is {self.max_body:,} bytes", instance=path)


class _Runner:
    """Runs checks in worker threads: a slot limit (429 when full) and a time limit (504)."""

    def __init__(self, settings: Settings, checker: Checker | None, backend: Backend,
                 limit: int) -> None:
        self.settings, self.checker, self.backend, self.limit = settings, checker, backend, limit
        self.in_flight = 0
        self.pool = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="conli-serve")

    def settings_for(self, mode: Mode, body: JudgeRequest | None = None) -> Settings:
        """The settings of one request in ``mode``: the service's sentence limit, its flags."""
        update: dict[str, object] = {"max_response_sentences": self.settings.service_max_sentences}
        if isinstance(body, RewriteRequest) and body.fix_coverage is not None:
            update["fix_coverage"] = body.fix_coverage
        return mode_settings(self.settings, mode).model_copy(update=update)

    def job(self, mode: Mode, body: JudgeRequest) -> Callable[[], BaseModel]:
        """Return the blocking work for one request; its texts are validated once, there."""
        settings = self.settings_for(mode, body)
        checker = self.checker
        points = body.points if isinstance(body, CheckRequest) else None

        def run() -> BaseModel:
            checked = check_input(
                body.source, body.response, question=body.question, points=points,
                max_source_chars=settings.max_source_chars,
                max_response_chars=settings.max_response_chars,
            )
            if mode == "judge" or checker is None:
                return judge_only(self.backend, checked, settings, checker)
            return checker.run(checked, settings=settings)

        return run

    def admit(self) -> None:
        """Take a slot, or answer 429 with ``Retry-After`` when every slot is taken."""
        if self.in_flight >= self.limit:
            retry = str(self.settings.service_retry_after_seconds)
            raise ProblemError(429, "busy", "too many requests in flight",
                               f"{self.limit} requests are running; retry in {retry}s",
                               headers={"Retry-After": retry})
        self.in_flight += 1

    async def run(self, job: Callable[[], BaseModel]) -> BaseModel:
        """Run ``job`` in a slot; a timed-out job keeps its slot until its thread finishes."""
        self.admit()
        future = asyncio.get_running_loop().run_in_executor(self.pool, job)
        future.add_done_callback(self._release)
        try:
            limit = self.settings.service_timeout_seconds
            return await asyncio.wait_for(asyncio.shield(future), limit)
        except TimeoutError:
            raise ProblemError(504, "timeout", "the check took too long",
                               f"the limit is {self.settings.service_timeout_seconds:g}s") from None

    def _release(self, future: "asyncio.Future[BaseModel]") -> None:
        self.release()
        if not future.cancelled():
            future.exception()  # retrieved: a late failure after a timeout is not re-logged

    def release(self) -> None:
        """Free a slot."""
        self.in_flight -= 1

    def stream(self, opening: StreamOpening, chunks: AsyncGenerator[str, None]) -> Events:
        """A streamed check of ``chunks``; the source is validated here, before any is read."""
        if self.checker is None:
            raise ConfigError("this service has no checker to stream with")
        return self.checker.astream(opening.source, chunks, question=opening.question,
                                    settings=self.settings_for("check"))


if _MISSING_EXTRA is None:

    class _NDJSONStream(StreamingResponse):
        """A streamed NDJSON answer that leaves ``receive`` to the route reading the body.

        Starlette's own would listen on ``receive`` for the client leaving, and drop the body
        messages the route is still reading; the stream's reader notices the client leaving.
        """

        media_type = NDJSON

        async def __call__(self, scope: "Scope", receive: "Receive", send: "Send") -> None:
            await self.stream_response(send)

    class _NDJSONLines(JSONResponse):
        """The stream's answer as the OpenAPI shows it: JSON documents, one per line."""

        media_type = NDJSON


async def _body(request: "Request", read: asyncio.Event) -> AsyncIterator[bytes]:
    """The request body as it arrives; ``read`` is set once all of it is in."""
    try:
        async for data in request.stream():
            yield data
    except ClientDisconnect:
        raise StreamClosed("the client left mid-stream") from None
    read.set()


async def _left(read: asyncio.Event, receive: "Receive") -> None:
    """Return once the client has left (until the body is in, its reader notices that)."""
    await read.wait()
    while (await receive())["type"] != "http.disconnect":
        continue


async def _open_stream(runner: _Runner, request: "Request") -> "Response":
    """Read and validate the opening line, take a slot, then answer as sentences complete."""
    read = asyncio.Event()
    try:
        opening, chunks = await read_request(ndjson_lines(_body(request, read)))
    except StreamClosed:
        return Response(status_code=400)  # gone before it said what to check: nobody to tell
    events = runner.stream(opening, chunks)
    runner.admit()
    relay = Relay(events, timeout=runner.settings.service_timeout_seconds,
                  retry_after=runner.settings.service_retry_after_seconds,
                  left=_left(read, request.receive), on_end=runner.release)
    return _NDJSONStream(relay.lines(), headers={"Cache-Control": "no-cache",
                                                 "X-Accel-Buffering": "no"})


_STREAM_BODY = {"requestBody": {"required": True, "description": (
    "NDJSON, sent as the reply streams in (chunked): the first line "
    '{"source": ..., "question": ...}, then one {"text": ...} line per chunk of the reply. '
    "The Content-Type is not checked: the same lines as text/plain (what a browser's fetch() "
    "sends with a string body) are read the same way."),
    "content": {
        NDJSON: {"schema": {"oneOf": [StreamOpening.model_json_schema(),
                                      StreamChunk.model_json_schema()]}},
        "text/plain": {"schema": {"type": "string", "example": (
            '{"source": "The library opened in 1962."}\n{"text": "It opened in 19"}\n'
            '{"text": "62."}\n')}},
    }}}


def _error_handlers(app: "FastAPI", settings: Settings) -> None:
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
                                "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                          for e in errors),
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


def create_app(settings: Settings | None = None, backend: Backend | None = None, *,
               open_access: bool = False) -> "FastAPI":
    """Build the app and its checker once; ``backend`` overrides ``settings.llm`` (tests).

    Without ``settings.service_api_keys`` the app refuses to start unless ``open_access`` is set,
    and then it serves /v1 to loopback clients only.
    """
    if _MISSING_EXTRA is not None:
        raise ConfigError(f"the service needs the [service] extra: pip install 'conli[service]' "
                          f"({_MISSING_EXTRA})")
    settings = settings or Settings()
    if any(not key.strip() for key in settings.service_api_keys):
        raise ConfigError("CONLI_SERVICE_API_KEYS holds an empty key; every key needs text "
                          "(an unset shell variable inside the JSON gives exactly this)")
    if not settings.service_api_keys and not open_access:
        raise ConfigError("no API keys configured: set CONLI_SERVICE_API_KEYS='[\"...\"]', or run "
                          "open on loopback with --open")
    inner = backend or get_backend(settings.llm, settings)
    limit = settings.service_max_concurrent or inner.capabilities.max_concurrency
    runner = _Runner(settings, Checker(settings, backend=inner), inner, limit)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        runner.pool.shutdown(wait=False, cancel_futures=True)
        inner.close()

    app = FastAPI(title="conli", version=__version__, lifespan=lifespan,
                  description="Find, explain and rewrite the sentences of an LLM answer that its "
                              "source does not support, and score faithfulness 1-5.")
    app.add_middleware(_Guard, keys=list(settings.service_api_keys), open_access=open_access,
                       max_body=settings.service_max_body_bytes)
    _error_handlers(app, settings)
    key_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False)
    security = [Security(key_header)] if settings.service_api_keys else []
    errors = _problems(400, 401, 403, 413, 422, 429, 502, 503, 504)

    @app.get("/healthz", response_model=Health, tags=["ops"])
    async def healthz() -> Health:
        """Liveness; no key needed."""
        return Health(backend=inner.name, model=inner.model)

    @app.post("/v1/check", response_model=CheckResult, responses=errors, dependencies=security,
              tags=["conli"])
    async def check(body: CheckRequest) -> BaseModel:
        """Detect: the verdict of every sentence, with reasons and quoted evidence.

        With ``points``, ``coverage`` says which of them the response covers.
        """
        return await runner.run(runner.job("check", body))

    @app.post("/v1/rewrite", response_model=CheckResult, responses=errors, dependencies=security,
              tags=["conli"])
    async def rewrite(body: RewriteRequest) -> BaseModel:
        """Detect, then rewrite only the unsupported sentences (``refined_text``).

        With ``fix_coverage``, also add one checked sentence for each uncovered point.
        """
        return await runner.run(runner.job("rewrite", body))

    @app.post("/v1/judge", response_model=JudgeOnlyResult, responses=errors, dependencies=security,
              tags=["conli"])
    async def judge(body: JudgeRequest) -> BaseModel:
        """Score the response's faithfulness to the source, 1-5, with the rubric judge."""
        return await runner.run(runner.job("judge", body))

    @app.post(STREAM_PATH, response_class=_NDJSONLines, response_model=StreamLine,
              response_description=_STREAMED, responses=errors, dependencies=security,
              tags=["conli"], openapi_extra=_STREAM_BODY)
    async def check_stream(request: Request) -> Response:
        """Detect while the reply streams in: one NDJSON line per sentence as it completes."""
        return await _open_stream(runner, request)

    return app


_STREAMED = ("NDJSON, one line per event as it happens: a `sentence` line for each sentence as "
             "soon as the next begins (or the body ends), then one `done` line; a failure after "
             "the answer began is an `error` line (the problem's fields), the last line.")


# --- command line -------------------------------------------------------------------------


def run_serve(args: argparse.Namespace) -> int:
    """Start uvicorn; refuse ``--open`` on a non-loopback address."""
    if args.open and not _is_loopback(args.host):
        raise ConfigError(f"--open serves without keys and is allowed on loopback only, "
                          f"not {args.host}")
    app = create_app(session_settings(args), open_access=args.open)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0
