"""``POST /v1/check/batch``: many checks in one request, answered in input order.

Entry ``i`` of the answer is item ``i``'s: its result, or (if it failed, was unusable or
did not finish in time) its problem, mapped by the one error table; never a shifted list.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field

from conli.errors import ConliError
from conli.models import CheckResult
from conli.run.plan import RunOptions
from conli.service.bodies import BatchRequest, CheckRequest
from conli.service.problems import Problem, ProblemError, error_problem, problem_body
from conli.service.runner import Runner, TimedOut

log = logging.getLogger("conli.service.app")

BATCH_PATH = "/v1/check/batch"


class BatchEntry(BaseModel):
    """One item's outcome, in the item's place."""

    index: int = Field(description="the item's position in the request")
    ok: bool
    result: CheckResult | None = Field(default=None, description="the check's result, when ok")
    error: Problem | None = Field(default=None, description="why this item has no result")


class BatchResult(BaseModel):
    """Every item's outcome, in input order."""

    results: list[BatchEntry]
    failed: int = Field(description="items with an error instead of a result")


def _item(body: BatchRequest, item: CheckRequest) -> CheckRequest:
    """``item`` with the batch's options under its own (an item's option wins)."""
    if body.options is None:
        return item
    shared = body.options.model_dump(exclude_unset=True)
    own = item.options.model_dump(exclude_unset=True) if item.options else {}
    return item.model_copy(update={"options": RunOptions(**(shared | own))})


def _entry(index: int, outcome: BaseModel | BaseException, limit: float) -> BatchEntry:
    if isinstance(outcome, CheckResult):
        return BatchEntry(index=index, ok=True, result=outcome)
    if isinstance(outcome, TimedOut):
        problem = problem_body(504, "timeout", "the check took too long",
                               f"the batch's limit is {limit:g}s; this item did not finish")
    elif isinstance(outcome, BaseException):
        if not isinstance(outcome, ConliError):
            log.error("unexpected error in batch item %d", index, exc_info=outcome)
        problem = error_problem(outcome)
    else:  # pragma: no cover - a check job returns a CheckResult
        raise TypeError(f"unexpected batch outcome {type(outcome).__name__}")
    return BatchEntry(index=index, ok=False, error=problem)


def add_batch_route(app: FastAPI, runner: Runner, count_problem: Callable[[str], None],
                    **route: Any) -> None:
    """Register ``POST /v1/check/batch`` on ``app`` (``route``: security, responses).

    ``count_problem`` sees the kind of each item's error (the metrics).
    """

    @app.post(BATCH_PATH, response_model=BatchResult, tags=["conli"], **route)
    async def check_batch(body: BatchRequest) -> BatchResult:
        """Detect for many (source, response) pairs: one entry per item, in input order.

        At most ``CONLI_SERVICE_BATCH_MAX_ITEMS`` items (413 beyond). The batch takes as
        many free request slots as it has items (429 when none is free); an item that fails
        gets its problem in its place, and the others go on.
        """
        most = runner.settings.service_batch_max_items
        if len(body.items) > most:
            raise ProblemError(413, "too-large", "too many items",
                               f"{len(body.items)} items; the limit is {most} "
                               "(CONLI_SERVICE_BATCH_MAX_ITEMS)")
        jobs = [runner.check_job(_item(body, item)) for item in body.items]
        outcomes = await runner.run_many(jobs)
        limit = runner.settings.service_timeout_seconds
        entries = [_entry(i, outcome, limit) for i, outcome in enumerate(outcomes)]
        for entry in entries:
            if entry.error is not None:
                count_problem(entry.error.type.rsplit(":", 1)[-1])
        return BatchResult(results=entries, failed=sum(not e.ok for e in entries))
