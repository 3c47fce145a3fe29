"""What the batch runner and the service share: modes, a call throttle, judge-only runs.

Each front door (batch, service, hook) offers the same three modes on the same graph:
``check`` detects only, ``rewrite`` detects and rewrites, ``judge`` scores 1-5 only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel

from conli.agents.judge import judge
from conli.agents.structured import CallRecord
from conli.backends.base import Backend, Completion, Message
from conli.config import Settings
from conli.inputs import validate_text
from conli.models import JudgeResult, UsageTotals

Mode = Literal["check", "rewrite", "judge"]
MODES: tuple[Mode, ...] = ("check", "rewrite", "judge")


class JudgeOnlyResult(BaseModel):
    """The result of ``judge`` mode: one rubric score of the response, and what it cost."""

    judge: JudgeResult
    usage: UsageTotals


def mode_settings(base: Settings, mode: Mode, *, with_judge: bool = False) -> Settings:
    """Return the settings for one mode: ``check`` = detect only, ``rewrite`` = detect + rewrite.

    ``with_judge`` adds the rubric judge (before/after scores) to either.
    """
    if mode == "judge":
        return base
    return base.model_copy(update={"mitigate": mode == "rewrite", "judge": with_judge})


def usage_of(calls: Iterable[CallRecord]) -> UsageTotals:
    """Sum the tokens, calls and seconds of some model calls."""
    totals = UsageTotals()
    for call in calls:
        totals.calls += 1
        totals.prompt_tokens += call.usage.prompt_tokens
        totals.cached_tokens += call.usage.cached_tokens
        totals.completion_tokens += call.usage.completion_tokens
        totals.seconds += call.usage.seconds
    return totals


def judge_only(backend: Backend, source: str, response: str, settings: Settings) -> JudgeOnlyResult:
    """Validate both texts like a check does, then score the response with the rubric."""
    validate_text(source, name="source", max_chars=settings.max_source_chars)
    validate_text(response, name="response", max_chars=settings.max_response_chars)
    result, calls = judge(backend, source, response, settings)
    return JudgeOnlyResult(judge=result, usage=usage_of(calls))


class ThrottledBackend:
    """A backend proxy that lets at most ``max_concurrency`` calls through at once.

    Records (batch) or requests (service) run in parallel and each may fan out NLI calls;
    this keeps the total in flight within what the backend allows.
    """

    def __init__(self, inner: Backend, limit: int | None = None) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.model: str = inner.model
        self.hypotheses_per_call: int = inner.hypotheses_per_call
        self.context_window: int | None = inner.context_window
        self.max_concurrency = max(1, limit or inner.max_concurrency)
        self._gate = threading.BoundedSemaphore(self.max_concurrency)

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int,
        json_schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
    ) -> Completion:
        """Wait for a free slot, then call the wrapped backend."""
        with self._gate:
            return self.inner.complete(
                messages, max_tokens=max_tokens, json_schema=json_schema, temperature=temperature
            )

    def close(self) -> None:
        """Release the wrapped backend."""
        self.inner.close()
