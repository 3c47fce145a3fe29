"""What one check carries through every layer without threading it through each call.

A check's deadline, its cancel flag and its progress listener live in context variables:
``backends.retry`` reads the deadline and the flag before each attempt (``check_deadline``), the NLI
agent reports progress, and worker threads inherit them through ``propagate``. The flag
is how a caller that stopped waiting (an ``acheck`` whose task was cancelled) stops the
check still running in its thread: no model call starts once it is set.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from conli.errors import CheckCancelledError, DeadlineExceededError

P = ParamSpec("P")
T = TypeVar("T")
Progress = Callable[[str, int, int], None]  # (step, done, total)

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("deadline", default=None)
_progress: contextvars.ContextVar[Progress | None] = contextvars.ContextVar(
    "progress", default=None
)
_cancelled: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "cancelled", default=None
)


@contextmanager
def scope(deadline_seconds: float | None, progress: Progress | None = None) -> Iterator[None]:
    """Run the body as one check: no model call starts after ``deadline_seconds``."""
    end = None if deadline_seconds is None else time.monotonic() + deadline_seconds
    tokens = (_deadline.set(end), _progress.set(progress))
    try:
        yield
    finally:
        _deadline.reset(tokens[0])
        _progress.reset(tokens[1])


def remaining() -> float | None:
    """Seconds left before the check's deadline (None: no deadline)."""
    end = _deadline.get()
    return None if end is None else end - time.monotonic()


def cancellable(flag: threading.Event) -> contextvars.Context:
    """A copy of the caller's context in which a check stops at its next call once ``flag`` is set.

    Run the check in it (``context.run``, in any thread); ``scope`` inside keeps the flag.
    """
    context = contextvars.copy_context()
    context.run(_cancelled.set, flag)
    return context


async def on_pool(pool: Executor, work: Callable[[], T]) -> T:
    """Await ``work()`` run on ``pool``, cancellable: a cancel stops it at its next model call.

    The work runs in a copy of the caller's context (as ``asyncio.to_thread`` copies it);
    the one call in flight, if any, ends first.
    """
    flag = threading.Event()
    context = cancellable(flag)
    running = asyncio.get_running_loop().run_in_executor(pool, context.run, work)
    try:
        return await running
    except asyncio.CancelledError:
        flag.set()  # the thread runs on: no model call starts after this
        raise


def check_deadline() -> None:
    """Raise before a model call that must not start: the check was cancelled or is late.

    ``CheckCancelledError`` once the check's cancel flag is set (``cancellable``);
    ``DeadlineExceededError`` once its deadline has passed.
    """
    flag = _cancelled.get()
    if flag is not None and flag.is_set():
        raise CheckCancelledError("the check was cancelled (its caller stopped waiting); "
                                  "no further model call was started")
    left = remaining()
    if left is not None and left <= 0:
        raise DeadlineExceededError(
            "the check ran past its deadline (CONLI_CHECK_DEADLINE_SECONDS); "
            "no further model call was started"
        )


def report(step: str, done: int, total: int) -> None:
    """Tell the check's progress listener, if any, how far ``step`` has got."""
    listener = _progress.get()
    if listener is not None:
        listener(step, done, total)


def propagate(fn: Callable[P, T]) -> Callable[P, T]:
    """``fn`` run in a copy of the caller's context, for worker threads."""
    context = contextvars.copy_context()

    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return context.copy().run(fn, *args, **kwargs)

    return run
