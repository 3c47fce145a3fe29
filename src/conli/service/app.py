"""``conli serve``: check, rewrite and judge over HTTP (FastAPI + uvicorn, the [service] extra).

The checker (and its compiled graph) is built once in ``create_app``; each request runs in
a worker thread, with a per-request timeout and a concurrency limit that answers 429 with
``Retry-After`` when full. Every error is an RFC 9457 problem (``application/problem+json``);
a body the API cannot use is a 4xx, never a 500. ``/v1/check/stream`` reads an NDJSON body
while it arrives and answers one NDJSON line per sentence as each completes (``streaming``).
"""

import asyncio
import logging
import logging.config
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from pydantic import BaseModel

from conli.backends import get_backend
from conli.backends.base import Backend
from conli.config import Settings
from conli.errors import ConfigError, install_hint
from conli.models import CheckResult
from conli.pipeline import Checker
from conli.run.doors import JudgedTexts, JudgeOnlyResult
from conli.service.bodies import CheckRequest, JudgeRequest, RewriteRequest
from conli.service.stream import (
    Activity,
    ClientPace,
    Relay,
    StreamChunk,
    StreamClosed,
    StreamLine,
    StreamOpening,
    ndjson_lines,
    paced,
    read_request,
)
from conli.streaming import NDJSON
from conli.version import __version__

_MISSING_EXTRA: str | None = None
try:
    import uvicorn
    from fastapi import FastAPI, Request, Security
    from fastapi.security import APIKeyHeader
    from fastapi_offline import FastAPIOffline
    from starlette.requests import ClientDisconnect
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.types import Receive, Scope, Send

    from conli.service.batch_route import add_batch_route
    from conli.service.guard import API_KEY_HEADER, STREAM_PATH, Guard, is_loopback
    from conli.service.ops import Metrics, Observe, Readiness, add_ops_routes, log_config
    from conli.service.problems import install_error_handlers, problems
    from conli.service.runner import Runner
except ImportError as exc:  # pragma: no cover - the [service] extra is not installed
    _MISSING_EXTRA = str(exc)

log = logging.getLogger("conli.service.app")


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


async def _open_stream(runner: "Runner", request: "Request", metrics: "Metrics") -> "Response":
    """Read and validate the opening line, take a slot, then answer as sentences complete.

    The client may keep the stream waiting only as ``ClientPace`` allows; the server's own
    work (a check running, a verdict unsent: ``activity``) is not the client's waiting.
    """
    settings, read, activity = runner.settings, asyncio.Event(), Activity()
    pace = ClientPace(activity, idle=settings.service_stream_idle_seconds,
                      min_rate=settings.service_stream_min_rate)
    try:
        opening, chunks = await read_request(ndjson_lines(paced(_body(request, read), pace)),
                                             pace)
    except StreamClosed:
        return Response(status_code=400)  # gone before it said what to check: nobody to tell
    events = runner.stream(opening, chunks, activity.busy)
    runner.admit_stream()
    pace.hold_slot()
    relay = Relay(events, timeout=settings.service_timeout_seconds,
                  retry_after=settings.service_retry_after_seconds,
                  left=_left(read, request.receive), on_end=runner.release_stream,
                  activity=activity)
    return _NDJSONStream(metrics.stream_lines(relay.lines()), headers={"Cache-Control": "no-cache",
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


@dataclass(frozen=True)
class Mount:
    """Routes another front door adds to this app (``conli.proxy``'s), and how they are guarded.

    ``add(app, runner, metrics)`` adds them and returns what to call at shutdown;
    ``paths`` are refused in OpenAI's error shape; with ``bearer`` a key may come as
    ``Authorization: Bearer`` too.
    """

    add: "Callable[[FastAPI, Runner, Metrics], Callable[[], None]]"
    paths: frozenset[str] = frozenset()
    bearer: bool = False


def create_app(settings: Settings | None = None, backend: Backend | None = None, *,
               open_access: bool = False, bind_host: str | None = None,
               mount: Mount | None = None) -> "FastAPI":
    """Build the app and its checker once; ``backend`` overrides ``settings.llm`` (tests).

    Without ``settings.service_api_keys`` the app refuses to start unless ``open_access`` is set,
    and then it serves /v1 to loopback clients only, and nothing to a ``Host`` other than
    a loopback address (or ``bind_host``) or to a browser page from another origin.
    ``mount`` adds another front door's routes (the proxy's) beside the service's.
    """
    _require_extra()
    settings = settings or Settings()
    if any(not key.strip() for key in settings.service_api_keys):
        raise ConfigError("CONLI_SERVICE_API_KEYS holds an empty key; every key needs text "
                          "(an unset shell variable inside the JSON gives exactly this)")
    if not settings.service_api_keys and not open_access:
        raise ConfigError("no API keys configured: set CONLI_SERVICE_API_KEYS='[\"...\"]', or run "
                          "open on loopback with --open")
    inner = backend or get_backend(settings.llm, settings)
    limit = settings.service_max_concurrent or inner.capabilities.max_concurrency
    checker = Checker(settings, backend=inner)
    runner = Runner(settings, checker, inner, limit)
    metrics, readiness = Metrics(), Readiness(checker.endpoints())
    runner.observers += [metrics.outcome, readiness.outcome]
    closing: list[Callable[[], None]] = []

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        runner.pool.shutdown(wait=False, cancel_futures=True)
        for close in closing:  # the proxy's upstream
            close()
        checker.close()  # the detectors' own servers too, and the backend

    # /docs and /redoc from the Swagger UI and ReDoc files fastapi-offline ships: no CDN
    app = FastAPIOffline(title="conli", version=__version__, lifespan=lifespan,
                         description="Find, explain and rewrite the sentences of an LLM answer "
                                     "that its source does not support, and score faithfulness "
                                     "1-5.")
    app.add_middleware(Guard, keys=list(settings.service_api_keys), open_access=open_access,
                       max_body=settings.service_max_body_bytes, bind_host=bind_host,
                       bearer=mount is not None and mount.bearer,
                       openai_paths=mount.paths if mount is not None else frozenset())
    app.add_middleware(Observe, metrics=metrics,  # outermost: it sees the guard's refusals
                       routes=lambda: {getattr(r, "path", "") for r in app.routes})
    install_error_handlers(app, settings)
    key_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False)
    security = [Security(key_header)] if settings.service_api_keys else []
    errors = problems(400, 401, 403, 413, 422, 429, 502, 503, 504)

    add_ops_routes(app, inner, readiness, metrics)

    @app.post("/v1/check", response_model=CheckResult, responses=errors, dependencies=security,
              tags=["conli"])
    async def check(body: CheckRequest) -> BaseModel:
        """Detect: the verdict of every sentence, with reasons and quoted evidence.

        With ``points``, ``coverage`` says which of them the response covers.
        """
        return await runner.run(runner.check_job(body))

    @app.post("/v1/rewrite", response_model=CheckResult, responses=errors, dependencies=security,
              tags=["conli"])
    async def rewrite(body: RewriteRequest) -> BaseModel:
        """Detect, then rewrite only the unsupported sentences (``refined_text``).

        With ``fix_coverage``, also add one checked sentence for each uncovered point.
        """
        return await runner.run(runner.rewrite_job(body))

    @app.post("/v1/judge", response_model=JudgeOnlyResult | JudgedTexts, responses=errors,
              dependencies=security, tags=["conli"])
    async def judge(body: JudgeRequest) -> BaseModel:
        """Score faithfulness to the source, 1-5, in the service's judge mode.

        ``response``: one result; ``responses`` (several candidates): one result each, in
        order, under ``texts`` with the mode that ran, as ``conli judge --json`` gives them.
        """
        return await runner.run(runner.judge_job(body))

    add_batch_route(app, runner, metrics.problem, responses=errors, dependencies=security)

    @app.post(STREAM_PATH, response_class=_NDJSONLines, response_model=StreamLine,
              response_description=_STREAMED, responses=errors, dependencies=security,
              tags=["conli"], openapi_extra=_STREAM_BODY)
    async def check_stream(request: Request) -> Response:
        """Detect while the reply streams in: one NDJSON line per sentence as it completes."""
        return await _open_stream(runner, request, metrics)

    if mount is not None:
        closing.append(mount.add(app, runner, metrics))
    return app


_STREAMED = ("NDJSON, one line per event as it happens: a `sentence` line for each sentence as "
             "soon as the next begins (or the body ends), then one `done` line; a failure after "
             "the answer began is an `error` line (the problem's fields), the last line.")


# --- command line -------------------------------------------------------------------------


def _require_extra() -> None:
    if _MISSING_EXTRA is not None:
        raise ConfigError(f"the service needs the [service] extra: {install_hint('service')} "
                          f"({_MISSING_EXTRA})")


def serve(settings: Settings, *, host: str = "127.0.0.1", port: int = 8000,
          open_access: bool = False, log_format: str = "text", log_level: str = "info",
          mount: Mount | None = None) -> int:
    """Build the app (and ``mount``'s routes), run it under uvicorn; ``open_access`` on loopback."""
    _require_extra()
    if open_access and not is_loopback(host):
        raise ConfigError(f"--open serves without keys and is allowed on loopback only, "
                          f"not {host}")
    logs = log_config(log_format, log_level)
    logging.config.dictConfig(logs)  # conli's own lines while the checker is built, too
    app = create_app(settings, open_access=open_access, bind_host=host, mount=mount)
    uvicorn.run(app, host=host, port=port, log_config=logs)
    return 0
