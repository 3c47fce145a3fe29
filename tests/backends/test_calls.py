"""The one model-call path: deadline, retries of transient errors only, and usage records."""

from __future__ import annotations

import pytest

from conli.backends.base import CallUsage, Completion, CompletionRequest, Message
from conli.backends.calls import CallRecord, call_model, usage_by_step
from conli.backends.fake import ScriptedBackend
from conli.errors import (
    BadRequestError,
    DeadlineExceededError,
    RateLimitError,
    TransientBackendError,
)
from conli.run.context import scope
from tests.support.fake_clock import FakeClock

MESSAGES: list[Message] = [{"role": "user", "content": "hi"}]
DONE = Completion("ok", CallUsage(prompt_tokens=7, completion_tokens=3, seconds=0.5), "stop")


def ask(backend: ScriptedBackend, step: str = "nli") -> tuple[Completion, CallRecord]:
    return call_model(backend, CompletionRequest(MESSAGES, max_tokens=8), step=step,
                      template="t.v1")


def test_transient_errors_are_retried_and_counted_in_the_usage(clock: FakeClock) -> None:
    backend = ScriptedBackend([TransientBackendError("503"),
                               RateLimitError("429", retry_after=2.0), DONE])
    completion, record = ask(backend)
    assert completion.text == "ok" and len(backend.calls) == 3
    assert record.failed_attempts == 2 and record.usage.prompt_tokens == 7
    assert len(clock.waits) == 2 and clock.waits[1] >= 2.0  # waited the Retry-After (fake)
    usage = usage_by_step([record])["nli"]
    assert (usage.calls, usage.failed_attempts, usage.completion_tokens) == (1, 2, 3)


def test_errors_no_retry_can_fix_are_raised_at_once(clock: FakeClock) -> None:
    backend = ScriptedBackend([BadRequestError("400 context too long"), DONE])
    with pytest.raises(BadRequestError):
        ask(backend)
    assert len(backend.calls) == 1 and clock.waits == []


def test_retries_give_up_after_the_last_attempt(clock: FakeClock) -> None:
    backend = ScriptedBackend([TransientBackendError(f"503 #{n}") for n in range(10)])
    with pytest.raises(TransientBackendError, match="#3"):
        ask(backend)
    assert len(backend.calls) == 4


def test_no_call_starts_once_the_deadline_has_passed(clock: FakeClock) -> None:
    backend = ScriptedBackend([DONE])
    with scope(10.0):
        clock.advance(11.0)
        with pytest.raises(DeadlineExceededError):
            ask(backend)
    assert backend.calls == []


def test_the_deadline_stops_retries_of_a_slow_failing_backend(clock: FakeClock) -> None:
    def slow_failure(_messages: list[Message]) -> TransientBackendError:
        clock.advance(100.0)  # each attempt takes 100 s and fails
        return TransientBackendError("timeout")

    backend = ScriptedBackend(responder=slow_failure)
    with scope(150.0), pytest.raises(DeadlineExceededError):
        ask(backend)
    assert len(backend.calls) == 2  # the third attempt would start past the deadline
    assert all(wait <= 50.0 for wait in clock.waits)  # no wait runs past it either
