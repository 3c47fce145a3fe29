"""Post-edit hook: check an LLM answer right after a chat model wrote it, sync or async.

``conli.check`` is the sync call; ``acheck`` is its async twin for event-loop apps (it runs
the blocking check on the checker's own pool, ``max_concurrency`` at a time).
``astream_check`` checks a reply while the chat model still streams it: each sentence's
verdict as soon as the sentence is complete. Pass a long-lived ``Checker`` to reuse its
backend and compiled graph across calls; for use inside a LangGraph app, add
``checker.graph`` as a subgraph and invoke the parent with ``context=checker.deps``
(examples/langgraph_chat_hook.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import AsyncGenerator, AsyncIterable
from contextlib import aclosing
from typing import Protocol

from conli.config import Settings
from conli.graph.state import CheckInput, NodeOutput
from conli.models import CheckResult
from conli.pipeline import Checker, check
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

    ``question`` and ``points`` as ``Checker.check`` takes them. With ``checker``, checks
    run on its own pool (``Checker.executor``): up to ``max_concurrency`` at once however
    many callers await, never bounded by the event loop's default thread pool.
    """
    if checker is not None:
        work = functools.partial(checker.check, source, response, question=question,
                                 points=points, settings=settings)
        context = contextvars.copy_context()  # as asyncio.to_thread does
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(checker.executor(), context.run, work)
    return await asyncio.to_thread(check, source, response, settings, question=question,
                                   points=points)


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
