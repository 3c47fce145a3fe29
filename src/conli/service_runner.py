"""Runs the service's checks in worker threads, within a slot limit and a time limit.

A request takes a slot (429 with ``Retry-After`` when every slot is taken) and runs in a
worker thread; one that passes the per-request time limit is answered 504.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel

from conli.backends.base import Backend
from conli.config import Settings
from conli.errors import ConfigError
from conli.frontdoor import Mode, judge_only, mode_settings
from conli.inputs import check_input
from conli.pipeline import Checker
from conli.service_bodies import CheckRequest, JudgeRequest, RewriteRequest
from conli.service_problems import ProblemError
from conli.stream_http import StreamOpening
from conli.streaming import Events


class Runner:
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

    def _release(self, future: asyncio.Future[BaseModel]) -> None:
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
