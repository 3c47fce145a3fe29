"""Counting one ``conli batch`` record's model calls, failed ones too.

A record that fails carries no result and so no usage: ``CountingBackend`` counts each call
in the running record's ``CallTally`` (set by ``tallied``) so the summary still sees them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

from conli.backends.base import Backend, Completion, CompletionRequest

T = TypeVar("T")


class CallTally:
    """The model calls one record made: answered, and failed (retried or not)."""

    def __init__(self) -> None:
        self.calls = 0
        self.failed = 0
        self._lock = threading.Lock()

    def count(self, *, ok: bool) -> None:
        """Count one call; a record's calls may run in several threads."""
        with self._lock:
            if ok:
                self.calls += 1
            else:
                self.failed += 1

    def usage(self) -> dict[str, Any]:
        """``{"usage": {...}}`` for a failed record's OUT line, or ``{}`` if it made no call."""
        if not (self.calls or self.failed):
            return {}
        return {"usage": {"calls": self.calls, "failed_calls": self.failed}}


# The tally of the record being run; the pipeline's threads copy the context, so share it.
_TALLY: ContextVar[CallTally | None] = ContextVar("conli_batch_tally", default=None)


def tallied(tally: CallTally, fn: Callable[[], T]) -> T:
    """``fn()`` with every call through a ``CountingBackend`` counted in ``tally``."""
    token = _TALLY.set(tally)
    try:
        return fn()
    finally:
        _TALLY.reset(token)


class CountingBackend:
    """``inner``, with each call counted in the running record's ``CallTally``.

    A record that fails carries no result and so no usage; this is how its failed calls
    still reach the summary. Everything else (optional reading methods) is ``inner``'s.
    """

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.capabilities = inner.capabilities

    def complete(self, request: CompletionRequest) -> Completion:
        """``inner.complete``, counted."""
        tally = _TALLY.get()
        try:
            completion = self.inner.complete(request)
        except BaseException:
            if tally is not None:
                tally.count(ok=False)
            raise
        if tally is not None:
            tally.count(ok=True)
        return completion

    def close(self) -> None:
        """Close ``inner``."""
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
