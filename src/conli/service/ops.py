"""What an operator runs the service with: request ids, logs, metrics, liveness and readiness.

- Every request has an id: the client's ``X-Request-ID`` (if it is a short token) or a new
  one; it is in every response's header, every log line and every problem body.
- ``/metrics`` is Prometheus text (``prometheus_client``, one registry per app): requests by
  route and status, latency, verdicts, model calls and tokens, errors by kind.
- ``/healthz`` says the process is up; ``/readyz`` that the checker is built (the model
  loaded) and every model server it reaches answers (``--llm``'s and each detector's own):
  a failed model call (unavailable, rejected credentials) makes it 503 with the reason,
  naming the server, until a call, or its own probe of every server, succeeds. It answers
  from the last known state: the probe runs in the background, one at a time.
- ``log_config`` gives uvicorn's and conli's loggers one format, text or JSON lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from pydantic import BaseModel
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conli.backends.base import Backend, CompletionRequest
from conli.errors import AuthenticationError, BackendError, boundary
from conli.models import CheckResult, UsageTotals
from conli.run.doors import JudgedTexts, JudgeOnlyResult
from conli.service.problems import PROBLEM, REQUEST_ID, problem_response
from conli.streaming import DoneEvent
from conli.version import __version__

REQUEST_ID_HEADER = "X-Request-ID"
_GIVEN_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
PROBE_EVERY_SECONDS = 10.0
PROBE_GRACE_SECONDS = 0.5  # how long /readyz waits for a probe before answering as it knows


class Health(BaseModel):
    """Liveness: the service is up and which model answers."""

    status: str = "ok"
    backend: str
    model: str
    version: str = __version__


class Metrics:
    """The service's Prometheus metrics, in a registry of its own (one per app)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("conli_http_requests", "HTTP requests answered",
                                ["route", "status"], registry=self.registry)
        self.latency = Histogram("conli_http_request_seconds", "time to answer a request "
                                 "(a stream: to its last line)", ["route"],
                                 registry=self.registry,
                                 buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
        self.verdicts = Counter("conli_verdicts", "checked responses by verdict", ["verdict"],
                                registry=self.registry)
        self.calls = Counter("conli_model_calls", "model calls made by checks",
                             registry=self.registry)
        self.tokens = Counter("conli_model_tokens", "model tokens as the backend counted them",
                              ["kind"], registry=self.registry)
        self.errors = Counter("conli_errors", "problems answered (and batch items and stream "
                              "error lines), by kind", ["kind"], registry=self.registry)

    def outcome(self, outcome: object) -> None:
        """Count a finished check's verdict and usage (its error is counted where answered)."""
        if isinstance(outcome, CheckResult | DoneEvent):
            self.verdicts.labels(outcome.verdict).inc()
        if isinstance(outcome, CheckResult | DoneEvent | JudgeOnlyResult):
            self._usage(outcome.usage)
        if isinstance(outcome, JudgedTexts):
            for text in outcome.texts:
                self._usage(text.usage)

    def problem(self, kind: str) -> None:
        """Count one problem answered: a response, a batch item's entry, a stream's last line."""
        self.errors.labels(kind).inc()

    async def stream_lines(self, lines: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """A stream's answer lines passed on, its error line counted."""
        async for line in lines:
            if line.startswith(b'{"event":"error"'):
                self.problem(_kind(line))
            yield line

    def _usage(self, usage: UsageTotals) -> None:
        self.calls.inc(usage.calls)
        for kind in ("prompt", "completion", "cached"):
            self.tokens.labels(kind).inc(getattr(usage, f"{kind}_tokens"))

    def response(self) -> Response:
        """The metrics in Prometheus' text format."""
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


Endpoint = tuple[str, Callable[[], Backend]]  # a model server's name, and how to reach it


class Readiness:
    """Whether every model server answers, from each check's outcome and a throttled probe.

    ``endpoints`` are the servers the checker reaches (``Checker.endpoints``: ``--llm``'s
    and each detector's own); the probe asks each in turn and names the first that fails.
    ``/readyz`` answers from the last known state. A failure is probed now and then, in a
    thread of its own, one probe at a time; an answer waits at most ``grace`` seconds for a
    probe, so a hanging server neither holds a readiness check past a short client timeout
    nor gathers a thread per request.
    """

    def __init__(self, endpoints: Sequence[Endpoint], *,
                 probe_every: float = PROBE_EVERY_SECONDS,
                 grace: float = PROBE_GRACE_SECONDS) -> None:
        self.endpoints, self.probe_every, self.grace = list(endpoints), probe_every, grace
        self.failure: str | None = "the model servers have not been reached yet"
        self.probed_at = -probe_every
        self.probe: asyncio.Future[None] | None = None  # the one probe running, if any

    def outcome(self, outcome: object) -> None:
        """A finished check: a success clears a failure; an unusable backend sets one."""
        if not isinstance(outcome, BaseException):
            self.failure = None
        elif isinstance(outcome, AuthenticationError) or (
            isinstance(outcome, BackendError) and boundary(outcome).http_status == 503
        ):
            self.failure = f"{type(outcome).__name__}: {outcome}"

    async def reason(self) -> str | None:
        """Why the service is not ready (None: ready); probes a failed backend now and then."""
        if self.failure is None:
            return None
        if self.probe is None and time.monotonic() - self.probed_at >= self.probe_every:
            self.probed_at = time.monotonic()
            self.probe = self._start_probe()
        if self.probe is not None:
            await asyncio.wait([self.probe], timeout=self.grace)  # never cancels the probe
            waited = time.monotonic() - self.probed_at
            if self.probe is not None and waited >= self.probe_every:
                self.failure = f"the backend has not answered a probe in {waited:.0f}s"
        return self.failure

    def _start_probe(self) -> asyncio.Future[None]:
        """Ask every server in a daemon thread (a hanging one cannot hold up shutdown)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def ask() -> None:
            failed: tuple[str, BaseException] | None = None
            for name, reach in self.endpoints:
                try:
                    reach().complete(CompletionRequest(
                        [{"role": "user", "content": "Reply with OK."}], max_tokens=8))
                except Exception as exc:
                    failed = (name, exc)
                    break
            with contextlib.suppress(RuntimeError):  # the service stopped while it hung
                loop.call_soon_threadsafe(self._settle, done, failed)

        threading.Thread(target=ask, name="conli-readyz-probe", daemon=True).start()
        return done

    def _settle(self, done: asyncio.Future[None],
                failed: tuple[str, BaseException] | None) -> None:
        """The probe's answer becomes the known state; the next probe may start."""
        if failed is None:
            self.failure = None
        else:
            name, error = failed
            self.failure = f"{name} did not answer: {type(error).__name__}: {error}"
        self.probe = None
        done.set_result(None)


class Observe:
    """ASGI middleware: the request id (header, context, problem bodies) and the metrics."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics, routes: Callable[[], set[str]]) -> None:
        self.app, self.metrics, self.routes = app, metrics, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer with the request's id, and count the answer."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(REQUEST_ID_HEADER.lower().encode(), b"").decode(
            "latin-1")
        request_id = given if _GIVEN_ID.fullmatch(given) else uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)
        started, status, problem = time.perf_counter(), [500], [False]

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.lower() != REQUEST_ID_HEADER.lower().encode()]
                problem[0] = (b"content-type", PROBLEM.encode()) in headers
                message = {**message, "headers": [
                    *headers, (REQUEST_ID_HEADER.lower().encode(), request_id.encode())]}
            elif message["type"] == "http.response.body" and problem[0] and message.get("body"):
                self._count_problem(message["body"])
                problem[0] = False
            await send(message)

        try:
            await self.app(scope, receive, stamped)
        finally:
            route = scope["path"] if scope["path"] in self.routes() else "other"
            self.metrics.requests.labels(route, str(status[0])).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - started)
            REQUEST_ID.reset(token)

    def _count_problem(self, body: bytes) -> None:
        self.metrics.problem(_kind(body))


def _kind(problem: bytes) -> str:
    """The slug of a problem document's type (``urn:conli:problem:<slug>``)."""
    try:
        return str(json.loads(problem)["type"]).rsplit(":", 1)[-1]
    except (ValueError, KeyError, TypeError):
        return "unknown"


def add_ops_routes(app: FastAPI, backend: Backend, readiness: Readiness,
                   metrics: Metrics) -> None:
    """``/healthz``, ``/readyz`` and ``/metrics``: no key needed."""

    @app.get("/healthz", response_model=Health, tags=["ops"])
    async def healthz() -> Health:
        """Liveness: the process answers."""
        return Health(backend=backend.name, model=backend.model)

    @app.get("/readyz", response_model=Health, tags=["ops"],
             responses={503: {"description": "not ready: the reason is the problem's detail"}})
    async def readyz() -> Health | JSONResponse:
        """Readiness: the checker is built and the backend answers (503 with the reason)."""
        reason = await readiness.reason()
        if reason is not None:
            return problem_response(503, "not-ready", "the service is not ready", reason,
                                    instance="/readyz")
        return Health(backend=backend.name, model=backend.model)

    @app.get("/metrics", tags=["ops"], response_class=Response,
             responses={200: {"content": {"text/plain": {}}}})
    async def prometheus() -> Response:
        """Prometheus metrics."""
        return metrics.response()


# --- logs ---------------------------------------------------------------------------------


class RequestIdFilter(logging.Filter):
    """Gives every record the id of the request it was logged for (``-`` outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Stamp ``record.request_id``; never drops a record."""
        record.request_id = REQUEST_ID.get() or "-"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id (and the error)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(), "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or REQUEST_ID.get(),
        }
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(
                record.args) == 5:
            client, method, path, _, status = record.args
            line |= {"client": client, "method": method, "path": path, "status": status}
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def log_config(fmt: str, level: str) -> dict[str, Any]:
    """A ``logging.config`` dict for uvicorn.run: uvicorn's and conli's loggers, one format."""
    formatter: dict[str, Any] = (
        {"()": JsonFormatter} if fmt == "json" else
        {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"})
    handler = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr",
               "formatter": "main", "filters": ["request_id"]}
    level = level.upper()
    return {
        "version": 1, "disable_existing_loggers": False,
        "filters": {"request_id": {"()": RequestIdFilter}},
        "formatters": {"main": formatter},
        "handlers": {"main": handler},
        "loggers": {name: {"handlers": ["main"], "level": level, "propagate": False}
                    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "conli")},
    }
