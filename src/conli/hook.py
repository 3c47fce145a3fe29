"""Post-edit hook: check an LLM answer right after a chat model wrote it, sync or async.

``conli.check`` is the sync call; ``acheck`` is its async twin for event-loop apps (it runs
the blocking check in a worker thread). Pass a long-lived ``Checker`` to reuse its backend
and compiled graph across calls; for use inside a LangGraph app, add ``checker.graph`` as a
subgraph and invoke the parent with ``context=checker.deps`` (examples/langgraph_chat_hook.py).
"""

from __future__ import annotations

import asyncio

from conli.config import Settings
from conli.models import CheckResult
from conli.pipeline import Checker, check


async def acheck(
    source: str,
    response: str,
    settings: Settings | None = None,
    *,
    checker: Checker | None = None,
) -> CheckResult:
    """Async ``check``: with ``checker`` reuse it (``settings`` then overrides per call)."""
    if checker is not None:
        return await asyncio.to_thread(checker.check, source, response, settings=settings)
    return await asyncio.to_thread(check, source, response, settings)
