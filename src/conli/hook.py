"""Post-edit hook: check an LLM answer right after a chat model wrote it, sync or async.

``conli.check`` is the sync call; ``acheck`` is its async twin for event-loop apps (it runs
the blocking check in a worker thread). ``astream_check`` checks a reply while the chat model
still streams it: each sentence's verdict as soon as the sentence is complete. Pass a
long-lived ``Checker`` to reuse its backend and compiled graph across calls; for use inside
a LangGraph app, add ``checker.graph`` as a subgraph and invoke the parent with
``context=checker.deps`` (examples/langgraph_chat_hook.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterable
from contextlib import aclosing

from conli.config import Settings
from conli.models import CheckResult
from conli.pipeline import Checker, check
from conli.streaming import DoneEvent, SentenceEvent


async def acheck(
    source: str,
    response: str,
    settings: Settings | None = None,
    *,
    checker: Checker | None = None,
    points: object = None,
) -> CheckResult:
    """Async ``check``: with ``checker`` reuse it (``settings`` then overrides per call).

    ``points`` are what the response must cover, as ``Checker.check`` takes them.
    """
    if checker is not None:
        return await asyncio.to_thread(checker.check, source, response, points=points,
                                       settings=settings)
    return await asyncio.to_thread(check, source, response, settings, points=points)


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
