"""``conli serve --upstream SPEC``: OpenAI's chat completions API, each reply checked.

``POST /v1/chat/completions`` forwards the chat to the upstream (any backend spec, through
the backend contract), checks the reply against its sources (``wire.read_turn``) and
answers in the same format with a ``conli`` field and ``X-Conli-*`` headers; streamed,
sentence by sentence as each is checked (``release``). ``GET /v1/models`` lists the
upstream's model. The routes are mounted on the service's app: its keys (here also as the
bearer token), body cap, slots (429) and time limit (504) are theirs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from conli.backends import get_backend
from conli.backends.base import Backend, CallUsage, Completion, takes_keys
from conli.backends.base import CompletionRequest as Ask
from conli.config import Settings
from conli.errors import ConfigError, ConliError
from conli.proxy.release import UpstreamFailed, released
from conli.proxy.shapes import DONE, Answer, Stage, error_answer, sse
from conli.proxy.upstream import Reading
from conli.proxy.verdicts import (
    BLOCKED_FINISH,
    Policy,
    Verdicts,
    decided,
    refuse_early,
    unchecked,
)
from conli.proxy.wire import (
    NO_SOURCE,
    SOURCE_HEADER,
    Turn,
    parse_body,
    read_turn,
    streamed,
    upstream_ask,
)
from conli.run.request import RunRequest
from conli.service.app import Mount
from conli.service.ops import Metrics
from conli.service.problems import ProblemError
from conli.service.runner import Runner

CHAT_PATH, MODELS_PATH = "/v1/chat/completions", "/v1/models"


def proxy_mount(settings: Settings, upstream: Backend | None = None) -> Mount:
    """The proxy's routes, for ``create_app(mount=...)``; ``upstream`` overrides the spec (tests).

    The upstream is built when the app is: ``CONLI_PROXY_UPSTREAM``, or the checker's own
    backend when the spec is ``CONLI_LLM``'s (one model loaded for both).
    """

    def add(app: FastAPI, runner: Runner, metrics: Metrics) -> Callable[[], None]:
        spec = settings.proxy_upstream
        given = upstream or (runner.backend if spec == settings.llm else None)
        if given is None:
            if spec is None:
                raise ConfigError("the proxy needs an upstream: conli serve --upstream SPEC "
                                  "(or CONLI_PROXY_UPSTREAM)")
            given = get_backend(spec, settings)
        if settings.proxy_forward_client_key and takes_keys(given) is None:
            raise ConfigError(f"CONLI_PROXY_FORWARD_CLIENT_KEY: the {given.name} upstream "
                              "cannot send a client's key (OpenAI-compatible upstreams can)")
        _routes(app, _Proxy(settings, runner, given, metrics))
        owned = given is not runner.backend and upstream is None
        return given.close if owned else _nothing

    return Mount(add=add, paths=frozenset({CHAT_PATH, MODELS_PATH}),
                 bearer=not settings.proxy_forward_client_key)


def _nothing() -> None:
    """Nothing to close: the upstream is the checker's backend, or the caller's."""


class _Plain(BaseModel):
    """A whole reply's outcome, from the worker thread (an upstream failure as a value)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reply: Completion | None = None
    text: str = ""
    verdicts: Verdicts | None = None
    failed: ConliError | None = None


class _Proxy:
    """The two routes' work, over the service's runner (slots, time limit, observers)."""

    def __init__(self, settings: Settings, runner: Runner, upstream: Backend,
                 metrics: Metrics) -> None:
        self.settings, self.runner, self.upstream = settings, runner, upstream
        self.metrics = metrics
        self.policy = Policy.of(settings)

    def models(self) -> JSONResponse:
        """The one model this proxy answers with: the upstream's."""
        return JSONResponse({"object": "list", "data": [{
            "id": self.upstream.model, "object": "model", "created": 0,
            "owned_by": self.upstream.name}]})

    async def completions(self, request: Request) -> Response:
        """Read the request, ask the upstream, check the reply, answer in the same format."""
        try:
            body = parse_body(await request.body())
            turn = read_turn(body, request.headers.getlist(SOURCE_HEADER),
                             system_as_source=self.policy.system_as_source)
            policy = self.policy.for_turn(turn)
            ask = upstream_ask(body)
            upstream = self._upstream(request)
            await asyncio.to_thread(refuse_early, self.runner.checker, turn, policy)
        except Exception as exc:
            return self._error(exc, "request")
        stream, usage = streamed(body)
        answer = Answer(model=upstream.model)
        if stream:
            return await self._stream(upstream, ask, turn, policy, answer, usage)
        return await self._plain(upstream, ask, turn, policy, answer)

    def _upstream(self, request: Request) -> Backend:
        """The upstream, sending the client's bearer token where the operator forwards it."""
        keyed = takes_keys(self.upstream)
        if not self.settings.proxy_forward_client_key or keyed is None:
            return self.upstream
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ProblemError(401, "unauthorized", "no key for the upstream",
                               "this proxy forwards the client's key to its upstream: send it "
                               "as the bearer token (Authorization: Bearer ...)")
        return keyed.with_key(token.strip())

    async def _plain(self, upstream: Backend, ask: Ask, turn: Turn, policy: Policy,
                     answer: Answer) -> Response:
        def job(due: float) -> _Plain:
            try:
                reply = upstream.complete(ask)
            except ConliError as exc:  # the upstream's failure is no failed check
                return _Plain(failed=exc)
            text, verdicts = self._checked(reply.text, turn, policy, due)
            return _Plain(reply=reply, text=text, verdicts=verdicts)

        try:
            done = await self.runner.run(job)
        except ProblemError as exc:  # no free slot (429), or past the time limit (504)
            return self._error(exc, "request")
        except Exception as exc:
            return self._error(exc, "check")
        assert isinstance(done, _Plain)
        if done.failed is not None or done.reply is None or done.verdicts is None:
            return self._error(done.failed or ConliError("no reply"), "upstream")
        finish = BLOCKED_FINISH if done.verdicts.action == "blocked" else (
            done.reply.finish_reason or "stop")
        return JSONResponse(answer.completion(done.text, finish, done.reply.usage, done.verdicts),
                            headers=done.verdicts.headers())

    def _checked(self, reply: str, turn: Turn, policy: Policy,
                 due: float) -> tuple[str, Verdicts]:
        """The text to send for a whole reply and its ``conli`` field (in a worker thread)."""
        if turn.sources is None:
            return reply, unchecked(NO_SOURCE, policy)
        if not reply.strip():
            return reply, unchecked("the reply is empty: nothing to check", policy,
                                    turn.found_in)
        check = RunRequest.of(turn.sources, reply, limits=self.settings, question=turn.question,
                            options=policy.options(turn, self.settings.service_max_sentences))
        try:
            result = policy.run(self.runner.checker, check,
                                within=max(due - time.monotonic(), 1e-3))
        except ConliError as exc:
            if policy.on_check_error == "refuse":
                raise
            self.runner.observe(exc)
            return reply, unchecked(f"the check failed, the reply went out unchecked: "
                                    f"{type(exc).__name__}: {exc}", policy, turn.found_in)
        self.runner.observe(result)
        return decided(result, reply, policy, turn.found_in)

    async def _stream(self, upstream: Backend, ask: Ask, turn: Turn, policy: Policy,
                      answer: Answer, usage: bool) -> Response:
        """Ask the upstream, then stream the reply's sentences out as each is checked.

        The stream holds one of the service's slots until its reading of the upstream ends.
        The answer starts with the reply's first delta, so an upstream that fails before it
        gets an error answer with its own status.
        """
        try:
            self.runner.admit()
        except ProblemError as exc:
            return self._error(exc, "request")
        loop = asyncio.get_running_loop()
        limit = self.settings.service_timeout_seconds
        due = loop.time() + limit
        reading = Reading(upstream, ask, self.runner.pool)
        try:
            await asyncio.wait_for(reading.begun(), limit)
        except BaseException as exc:
            self._end(reading)
            if isinstance(exc, TimeoutError):
                return self._error(ProblemError(504, "timeout", "the upstream took too long",
                                                f"the limit is {limit:g}s"), "request")
            if isinstance(exc, Exception):
                return self._error(exc, "upstream")
            raise
        lines = self._lines(reading, turn, policy, answer, usage, due - loop.time())
        return _Events(lines, lambda: self._end(reading))

    def _end(self, reading: Reading) -> None:
        """Stop reading the upstream (once); the slot is free once the reading thread ends."""
        if reading.stop():
            reading.thread.add_done_callback(lambda _: self.runner.release())

    async def _lines(self, reading: Reading, turn: Turn, policy: Policy, answer: Answer,
                     usage: bool, left: float) -> AsyncIterator[bytes]:
        """The SSE events: the pieces as released, the finish, the ``conli`` chunk, [DONE]."""
        try:
            yield sse(answer.chunk({"role": "assistant", "content": ""}))
            verdicts: Verdicts | None = None
            async for item in released(self.runner.checker, turn, policy, reading.deltas(),
                                       settings=self.settings, within=max(left, 1e-3),
                                       max_sentences=self.settings.service_max_sentences):
                if isinstance(item, Verdicts):
                    verdicts = item
                else:
                    yield sse(answer.chunk({"content": item}))
            assert verdicts is not None  # the last item
            if verdicts.result is not None:
                self.runner.observe(verdicts.result)
            whole = reading.completion
            finish = BLOCKED_FINISH if verdicts.action == "blocked" else (
                whole.finish_reason if whole and whole.finish_reason else "stop")
            yield sse(answer.chunk({}, finish_reason=finish))
            spent = whole.usage if whole else CallUsage()
            yield sse(answer.chunk(usage=spent if usage else None, verdicts=verdicts))
            yield DONE
        except Exception as exc:
            upstream = isinstance(exc, UpstreamFailed)
            if not upstream:
                self.runner.observe(exc)  # the checker's failure, for readiness and metrics
            failed = error_answer(exc.error if isinstance(exc, UpstreamFailed) else exc,
                                  "upstream" if upstream else "check",
                                  client_key=self.settings.proxy_forward_client_key,
                                  retry_after=self.settings.service_retry_after_seconds)
            self.metrics.problem(str(failed.body["error"]["code"]))
            yield sse(failed.body)
        finally:
            self._end(reading)

    def _error(self, exc: BaseException, stage: Stage) -> JSONResponse:
        """An OpenAI-shaped error answer, counted in the metrics by its kind."""
        failed = error_answer(exc, stage, client_key=self.settings.proxy_forward_client_key,
                              retry_after=self.settings.service_retry_after_seconds)
        self.metrics.problem(str(failed.body["error"]["code"]))
        return JSONResponse(failed.body, status_code=failed.status, headers=failed.headers)


class _Events(StreamingResponse):
    """Server-sent events whose end (``on_end``) comes however the answer ends.

    A generator never started (the client gone before the first byte) runs no ``finally``.
    """

    def __init__(self, lines: AsyncIterator[bytes], on_end: Callable[[], None]) -> None:
        super().__init__(lines, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.on_end = on_end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer, then end the stream's work whatever happened."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.on_end()


def _routes(app: FastAPI, proxy: _Proxy) -> None:
    """Register ``POST /v1/chat/completions`` and ``GET /v1/models`` on ``app``."""

    @app.post(CHAT_PATH, tags=["proxy"], response_class=JSONResponse, openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "description": "OpenAI's chat completions request; the conli "
            "object (extra_body in the SDK) names the sources"}}}}})
    async def chat_completions(request: Request) -> Response:
        """OpenAI's chat completions, the reply checked (streamed with ``"stream": true``)."""
        return await proxy.completions(request)

    @app.get(MODELS_PATH, tags=["proxy"])
    async def models() -> JSONResponse:
        """The upstream's model, as OpenAI's model list."""
        return proxy.models()

