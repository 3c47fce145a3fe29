"""Runs the service's checks in worker threads, within a slot limit and a time limit.

A request takes a slot (429 with ``Retry-After`` when every slot is taken) and runs in a
worker thread; one that passes the per-request time limit is answered 504, and its check
stops with the answer: its deadline is the answer's, so no model call starts after the 504
(a call already running ends first, then the slot is free). A batch takes as many free
slots as it has items (at least one) and runs its items across them.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel

from conli.backends.base import Backend
from conli.config import Settings
from conli.errors import ConfigError, InputError
from conli.pipeline import Checker
from conli.run.doors import JudgedText, JudgedTexts
from conli.run.plan import RunOptions, options
from conli.run.request import RunRequest, StreamRequest
from conli.service.bodies import CheckRequest, JudgeRequest, RewriteRequest, TextsRequest
from conli.service.problems import ProblemError
from conli.service.stream import StreamOpening
from conli.streaming import Busy, DoneEvent, Events

Job = Callable[[float], BaseModel]  # the work of one request, given when its answer is due


def _left(due: float) -> float:
    """Seconds left until ``due`` (a monotonic time), never quite zero."""
    return max(due - time.monotonic(), 1e-3)


class TimedOut(Exception):
    """A batch item that did not finish within the request's time limit."""


class Runner:
    """Runs checks in worker threads: a slot limit (429 when full) and a time limit (504)."""

    def __init__(self, settings: Settings, checker: Checker, backend: Backend,
                 limit: int) -> None:
        self.settings, self.checker, self.backend, self.limit = settings, checker, backend, limit
        self.in_flight = 0
        self.streams = 0  # open streams, counted apart: an idle one never holds a check's slot
        self.observers: list[Callable[[object], None]] = []  # see each check's outcome
        self.pool = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="conli-serve")

    def options_for(self, body: TextsRequest | None = None, **more: object) -> RunOptions:
        """The options of one request: the service's sentence limit, the caller's, ``more``."""
        chosen: dict[str, object] = {"max_response_sentences": self.settings.service_max_sentences}
        if body is not None and body.options is not None:
            chosen |= body.options.model_dump(include=set(body.options.chosen()))
        return options(**chosen, **{name: value for name, value in more.items()
                                    if value is not None})

    def check_job(self, body: CheckRequest) -> Job:
        """``POST /v1/check`` (and a batch's item): detect (``Checker.run_check``)."""
        runs = self._runs(body, [body.response], body.points, self.checker.run_check)
        return lambda due: runs(due)[0]

    def rewrite_job(self, body: RewriteRequest) -> Job:
        """``POST /v1/rewrite``: detect and rewrite (``Checker.run_rewrite``)."""
        runs = self._runs(body, [body.response], body.points, self.checker.run_rewrite,
                          fix_coverage=body.fix_coverage)
        return lambda due: runs(due)[0]

    def judge_job(self, body: JudgeRequest) -> Job:
        """``POST /v1/judge``: one score, or one for each of ``responses`` in turn.

        Several are answered together, as ``conli judge --json`` does; more than
        ``CONLI_SERVICE_BATCH_MAX_ITEMS`` of them is a 413, as a batch's items are.
        """
        texts = body.texts()
        most = self.settings.service_batch_max_items  # several texts: a batch's bound
        if len(texts) > most:
            raise ProblemError(413, "too-large", "too many responses",
                               f"{len(texts)} responses; the limit is {most} "
                               "(CONLI_SERVICE_BATCH_MAX_ITEMS)")
        runs = self._runs(body, texts, None, self.checker.run_judge)
        if body.responses is None:
            return lambda due: runs(due)[0]
        mode = self.options_for(body).judge_mode or self.settings.judge_mode
        return lambda due: JudgedTexts(judge_mode=mode, texts=[
            JudgedText(index=i, **one.model_dump()) for i, one in enumerate(runs(due))])

    def _runs(self, body: TextsRequest, texts: list[str], points: object,
              entrance: Callable[..., BaseModel], **more: object
              ) -> Callable[[float], list[BaseModel]]:
        """The blocking work of a request's texts through its mode's entrance, in order.

        The texts are validated once, there, every one before any model call. Given the
        (monotonic) time the answer is due, each check's deadline ends there.
        """
        chosen = self.options_for(body, **more)

        def run(due: float) -> list[BaseModel]:
            requests = [RunRequest.of(body.source, text, question=body.question, points=points,
                                      limits=self.settings, options=chosen) for text in texts]
            try:
                return [entrance(one, within=_left(due)) for one in requests]
            except ConfigError as exc:
                if body.options is None:
                    raise
                raise InputError(f"the request's options cannot run here: {exc}") from exc

        return run

    def admit(self, wanted: int = 1) -> int:
        """Take up to ``wanted`` free slots (at least one), or answer 429 with ``Retry-After``."""
        if self.in_flight >= self.limit:
            retry = str(self.settings.service_retry_after_seconds)
            raise ProblemError(429, "busy", "too many requests in flight",
                               f"{self.limit} requests are running; retry in {retry}s",
                               headers={"Retry-After": retry})
        taken = min(wanted, self.limit - self.in_flight)
        self.in_flight += taken
        return taken

    def admit_stream(self) -> None:
        """Take a stream slot (``service_max_streams``), or answer 429 with ``Retry-After``."""
        most = self.settings.service_max_streams
        if self.streams >= most:
            retry = str(self.settings.service_retry_after_seconds)
            raise ProblemError(429, "busy", "too many streams open",
                               f"{most} streams are open (CONLI_SERVICE_MAX_STREAMS); retry in "
                               f"{retry}s", headers={"Retry-After": retry})
        self.streams += 1

    def release_stream(self) -> None:
        """Free a stream slot."""
        self.streams -= 1

    def _start(self, job: Job, due: float) -> asyncio.Future[BaseModel]:
        """``job`` in a worker thread, in a copy of this request's context (its id)."""
        context = contextvars.copy_context()
        return asyncio.get_running_loop().run_in_executor(self.pool, context.run,
                                                          self._observed, job, due)

    def _observed(self, job: Job, due: float) -> BaseModel:
        try:
            result = job(due)
        except Exception as exc:
            self.observe(exc)
            raise
        self.observe(result)
        return result

    def observe(self, outcome: object) -> None:
        """Tell the observers (metrics, readiness) how a check ended."""
        for observer in self.observers:
            observer(outcome)

    async def observed(self, events: Events) -> Events:
        """``events`` passed on as they come, the stream's end told to the observers."""
        try:
            async for event in events:
                if isinstance(event, DoneEvent):
                    self.observe(event)
                yield event
        except Exception as exc:
            self.observe(exc)
            raise

    async def run(self, job: Job) -> BaseModel:
        """Run ``job`` in a slot; a timed-out job keeps its slot until its model call ends."""
        self.admit()
        limit = self.settings.service_timeout_seconds
        due = time.monotonic() + limit
        future = self._start(job, due)
        future.add_done_callback(self._release)
        try:
            return await asyncio.wait_for(asyncio.shield(future), due - time.monotonic())
        except TimeoutError:
            raise ProblemError(504, "timeout", "the check took too long",
                               f"the limit is {self.settings.service_timeout_seconds:g}s") from None

    async def run_many(
        self, jobs: list[Job]
    ) -> list[BaseModel | BaseException]:
        """Run ``jobs`` across the slots a batch could take; each outcome in its job's place.

        A job's failure is its outcome (the others go on); a job not finished within the
        request's time limit is ``TimedOut``, and its slot is held until its thread ends.
        """
        lanes = self.admit(len(jobs))
        due = time.monotonic() + self.settings.service_timeout_seconds
        outcomes: list[BaseModel | BaseException] = [TimedOut()] * len(jobs)
        waiting = iter(enumerate(jobs))

        async def lane() -> None:
            for index, job in waiting:
                if time.monotonic() >= due:
                    continue  # past the limit: left as TimedOut, never started
                future = self._start(job, due)
                try:
                    outcomes[index] = await asyncio.wait_for(asyncio.shield(future),
                                                             due - time.monotonic())
                except TimeoutError:
                    future.add_done_callback(self._release)  # the thread keeps the slot
                    return
                except asyncio.CancelledError:
                    future.add_done_callback(self._release)
                    raise
                except Exception as exc:
                    outcomes[index] = exc
            self.release()

        await asyncio.gather(*(lane() for _ in range(lanes)))
        return outcomes

    def _release(self, future: asyncio.Future[BaseModel]) -> None:
        self.release()
        if not future.cancelled():
            future.exception()  # retrieved: a late failure after a timeout is not re-logged

    def release(self) -> None:
        """Free a slot."""
        self.in_flight -= 1

    def stream(self, opening: StreamOpening, chunks: AsyncGenerator[str, None],
               busy: Busy) -> Events:
        """A streamed check of ``chunks``; the source is validated here, before any is read.

        Each sentence's check runs inside ``busy()``.
        """
        request = StreamRequest.of(opening.source, chunks, limits=self.settings,
                                   question=opening.question, options=self.options_for())
        return self.observed(self.checker.run_stream(request, busy=busy))
