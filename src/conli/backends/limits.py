"""Process-wide call limits: how many model calls run at once, and per-minute budgets.

Every hosted backend takes a slot here around each HTTP call (each retry attempt too),
so a batch of responses checked in parallel never exceeds the configured concurrency or
the provider's requests-per-minute / tokens-per-minute quota, whichever backend runs.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from conli.config import BackendSettings
from conli.text.tokens import typical_tokens

_WINDOW_SECONDS = 60.0


@dataclass
class _Spend:
    """One call counted in the sliding window: when it started and its token cost."""

    at: float
    tokens: int


class Reservation:
    """A call's place in the window; ``settle`` replaces the estimate with real usage."""

    def __init__(self, spend: _Spend, lock: threading.Lock) -> None:
        self._spend = spend
        self._lock = lock

    def settle(self, tokens: int) -> None:
        """Record what the call really cost, as the provider counted it."""
        with self._lock:
            self._spend.tokens = max(0, tokens)


class CallLimiter:
    """A semaphore for concurrency plus a 60-second sliding window for RPM and TPM.

    A call first waits for a concurrency slot, then until one more request (and its
    estimated tokens) fits the last minute's budget. A single call larger than the whole
    TPM budget is let through alone rather than waiting forever.
    """

    def __init__(
        self,
        max_concurrency: int,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.max_concurrency = max_concurrency
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()
        self._window: deque[_Spend] = deque()
        self._clock = clock
        self._sleep = sleep

    @contextmanager
    def slot(self, estimated_tokens: int) -> Iterator[Reservation]:
        """Hold one concurrency slot and one request of the minute's budget for a call."""
        with self._slots:
            yield self._reserve(max(0, estimated_tokens))

    def _reserve(self, tokens: int) -> Reservation:
        while True:
            with self._lock:
                now = self._clock()
                while self._window and now - self._window[0].at >= _WINDOW_SECONDS:
                    self._window.popleft()
                if self._fits(tokens):
                    spend = _Spend(now, tokens)
                    self._window.append(spend)
                    return Reservation(spend, self._lock)
                wait = _WINDOW_SECONDS - (now - self._window[0].at)
            self._sleep(max(wait, 0.01))

    def _fits(self, tokens: int) -> bool:
        if self.requests_per_minute is not None and len(self._window) >= self.requests_per_minute:
            return False
        if self.tokens_per_minute is None or not self._window:
            return True
        return sum(s.tokens for s in self._window) + tokens <= self.tokens_per_minute


_SHARED: dict[tuple[int, int | None, int | None], CallLimiter] = {}
_SHARED_LOCK = threading.Lock()


def shared_limiter(settings: BackendSettings) -> CallLimiter:
    """Return the process's limiter for these settings; every backend shares it."""
    key = (settings.max_concurrency, settings.requests_per_minute, settings.tokens_per_minute)
    with _SHARED_LOCK:
        limiter = _SHARED.get(key)
        if limiter is None:
            limiter = _SHARED[key] = CallLimiter(*key)
        return limiter


def call_cost(texts: list[str], max_tokens: int) -> int:
    """A call's token cost before it runs, for the TPM budget: its prompt plus its answer cap."""
    return typical_tokens(sum(len(t) for t in texts)) + max_tokens
