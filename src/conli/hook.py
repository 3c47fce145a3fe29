"""Post-edit hook: check an LLM answer right after a chat model wrote it, sync or async.

``conli.check`` is the sync call; ``acheck`` is its async twin for event-loop apps (it runs
the blocking check on the checker's own pool, ``max_concurrency`` at a time). Cancelling an
``acheck`` (``asyncio.wait_for`` timing out) stops its check at the next model call. Without
a checker, ``acheck`` shares one per settings (``shared_checker``): one model load however
many calls run at once, closed when the interpreter exits.
``astream_check`` checks a reply while the chat model still streams it: each sentence's
verdict as soon as the sentence is complete. Pass a long-lived ``Checker`` to reuse its
backend and compiled graph across calls; for use inside a LangGraph app, add
``checker.graph`` as a subgraph and invoke the parent with ``context=checker.deps``
(examples/langgraph_chat_hook.py).
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import threading
from collections.abc import AsyncGenerator, AsyncIterable
from contextlib import aclosing
from typing import Protocol

from conli.config import Settings
from conli.graph.state import CheckInput, NodeOutput
from conli.models import CheckResult
from conli.pipeline import Checker
from conli.run_context import cancellable
from conli.streaming import DoneEvent, SentenceEvent


async def acheck(
    source: str,
    response: str,
    settings: Settings | None = None,
    *,
    checker: Checker | None = None,
    question: str | None = None,
    points: object = None,
) -> CheckResult:
    """Async ``check``: with ``checker`` reuse it (``settings`` then overrides per call).

    Without ``checker``, the one shared checker for ``settings`` (``shared_checker``).
    ``question`` and ``points`` as ``Checker.check`` takes them. Checks run on the checker's
    own pool (``Checker.executor``): up to ``max_concurrency`` at once however many callers
    await, never bounded by the event loop's default thread pool. Cancelling the call stops
    the check at its next model call (the one in flight, if any, ends first).
    """
    if checker is None:
        checker = await asyncio.to_thread(shared_checker, settings)
        settings = None  # the shared checker was built from them
    work = functools.partial(checker.check, source, response, question=question,
                             points=points, settings=settings)
    flag = threading.Event()
    context = cancellable(flag)  # the caller's context, as asyncio.to_thread copies it
    running = asyncio.get_running_loop().run_in_executor(checker.executor(), context.run, work)
    try:
        return await running
    except asyncio.CancelledError:
        flag.set()  # the thread runs on: no model call starts after this
        raise


# --- one checker per settings for callers that bring none -----------------------------

_shared: dict[str, Checker] = {}
_building: dict[str, threading.Lock] = {}
_shared_lock = threading.Lock()
_at_exit: list[object] = []  # holds close_shared_checkers once it is registered


def shared_checker(settings: Settings | None = None) -> Checker:
    """The one checker ``acheck`` uses for ``settings`` (None: ``CONLI_*``), built on first use.

    Concurrent first calls build it once (the others wait for it), so four calls at once
    load the model once, not four times. Every shared checker is closed at interpreter exit
    (``close_shared_checkers``).
    """
    chosen = settings if settings is not None else Settings()
    key = chosen.model_dump_json()
    with _shared_lock:
        if key in _shared:
            return _shared[key]
        building = _building.setdefault(key, threading.Lock())
    with building:  # one build per settings; other settings build alongside
        with _shared_lock:
            if key in _shared:
                return _shared[key]
        built = Checker(chosen)
        with _shared_lock:
            if not _at_exit:
                _at_exit.append(atexit.register(close_shared_checkers))
            _shared[key] = built
            _building.pop(key, None)
        return built


def close_shared_checkers() -> None:
    """Close every shared checker (after the checks they run finish); the next use rebuilds."""
    with _shared_lock:
        closing = list(_shared.values())
        _shared.clear()
    for checker in closing:
        checker.close()


async def astream_check(
    source: str,
    chunks: AsyncIterable[str],
    settings: Settings | None = None,
    *,
    checker: Checker | None = None,
    question: str | None = None,
) -> AsyncGenerator[SentenceEvent | DoneEvent, None]:
    """``Checker.astream`` as a hook: each sentence's verdict as the reply streams in.

    With ``checker`` reuse it (``settings`` then overrides per call); without, build one
    for this reply (in a worker thread) and release it at the end.
    """
    if checker is None:
        own = await asyncio.to_thread(Checker, settings)
        try:
            async with aclosing(astream_check(source, chunks, checker=own,
                                              question=question)) as events:
                async for event in events:
                    yield event
        finally:
            await asyncio.to_thread(own.close)
        return
    stream = checker.astream(source, chunks, question=question, settings=settings)
    async with aclosing(stream) as events:  # closing this hook closes the stream at once
        async for event in events:
            yield event


# --- conli as one node of a host LangGraph app ------------------------------------------


class CheckNode(Protocol):
    """A LangGraph node: reads the host's state, returns the keys conli writes."""

    def __call__(self, state: CheckInput) -> NodeOutput:
        """Check ``state``'s response against its source."""
        ...


def check_node(checker: Checker, *, settings: Settings | None = None) -> CheckNode:
    """A node that checks the state's ``response`` against its ``source``.

    It reads ``source``, ``response`` and, if present, ``question`` and ``points``; bad
    input raises ``InputError`` before any model call, a backend that cannot be used
    raises ``BackendError``, and a check past its deadline raises ``DeadlineExceededError``.
    ``settings`` overrides the checker's for this node (e.g. detect only), as in ``check``.
    """

    def conli(state: CheckInput) -> NodeOutput:
        result = checker.check(
            state.get("source"),  # type: ignore[arg-type]  # validated in check
            state.get("response"),  # type: ignore[arg-type]
            question=state.get("question"),
            points=state.get("points"),
            settings=settings,
        )
        return node_output(result)

    return conli


def node_output(result: CheckResult) -> NodeOutput:
    """The state keys the node writes, from the front doors' result."""
    return NodeOutput(
        verdict=result.verdict,
        support_score=result.support_score,
        sentences=result.sentences,
        refined_text=result.refined_text,
        mitigation=result.mitigation,
        judge_raw=result.judge_raw,
        judge_refined=result.judge_refined,
        coverage=result.coverage,
        word_scores=result.word_scores,
        check_result=result,
    )
