"""The one place calls are retried: transient failures only, with jittered backoff.

Model calls reach it through ``backends.calls.call_model``, which also records usage;
other provider calls (Azure NER) use ``call_with_retries`` directly.

Rate limits wait at least the provider's ``Retry-After``; authentication and bad-request
errors are raised at once because no retry can fix them. No attempt starts, and no wait
runs, past the check's deadline (``run.context``). Each retry is logged at INFO on
``conli.backends.retry``: what was called, the attempt, the error's kind and the wait; never
the error's message (a provider may echo the request) nor any key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from conli.errors import RateLimitError, TransientBackendError
from conli.run.context import check_deadline, remaining

T = TypeVar("T")
log = logging.getLogger(__name__)


class _WaitHonouringRetryAfter:
    """Exponential backoff with full jitter, never shorter than a given Retry-After."""

    def __init__(self, max_wait: float) -> None:
        self._backoff = wait_random_exponential(multiplier=0.5, max=max_wait)
        self._max_wait = max_wait

    def __call__(self, state: RetryCallState) -> float:
        wait = float(self._backoff(state))
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, RateLimitError) and error.retry_after is not None:
            wait = max(wait, min(error.retry_after, self._max_wait))
        left = remaining()
        return wait if left is None else max(0.0, min(wait, left))


def _sleep(seconds: float) -> None:
    """Wait between attempts (a seam: tests replace it with a fake clock's)."""
    time.sleep(seconds)


def call_with_retries(
    fn: Callable[[], T],
    *,
    attempts: int = 4,
    max_wait: float = 30.0,
    on_failure: Callable[[BaseException], None] | None = None,
    what: str = "a provider call",
) -> T:
    """Run ``fn``; retry ``TransientBackendError`` up to ``attempts`` tries in total.

    ``on_failure`` sees every failed attempt that is retried (for usage accounting);
    ``what`` names the call in the retry's log line.
    """

    def attempt() -> T:
        check_deadline()
        return fn()

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        if on_failure is not None and error is not None:
            on_failure(error)
        wait = state.next_action.sleep if state.next_action else 0.0
        asked = getattr(error, "retry_after", None)
        log.info("retrying %s: attempt %d of %d failed with %s%s; next attempt in %.2f s",
                 what, state.attempt_number, attempts, type(error).__name__,
                 "" if asked is None else f" (Retry-After {asked:g} s)", wait)

    retrying = Retrying(
        sleep=_sleep,
        retry=retry_if_exception_type(TransientBackendError),
        wait=_WaitHonouringRetryAfter(max_wait),
        stop=stop_after_attempt(attempts),
        before_sleep=before_sleep,
        reraise=True,
    )
    return retrying(attempt)
