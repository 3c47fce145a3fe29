"""Post-edit hook: check an LLM answer right after a chat model wrote it, sync or async.

``conli.check`` is the sync call; ``acheck`` is its async twin for event-loop apps (it runs
the blocking check on the checker's own pool, ``max_concurrency`` at a time). Cancelling an
``acheck`` (``asyncio.wait_for`` timing out) stops its check at the next model call. Without
a checker, ``acheck`` shares one per settings (``shared_checker``): one model load however
many calls run at once, closed when the interpreter exits. ``acheck_many`` checks many
pairs (a DataFrame, a dataset), ``max_concurrency`` at a time, with a progress callback.
``astream_check`` checks a reply while the chat model still streams it: each sentence's
verdict as soon as the sentence is complete. Pass a long-lived ``Checker`` to reuse its
backend and compiled graph across calls. ``check_node`` is the check as a node of a host
LangGraph app (its state read and written by ``conli.chat``); an app without a context of
its own may instead add ``checker.graph`` as a subgraph and invoke the parent with
``context=checker.deps`` (examples/langgraph_chat_hook.py).
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import threading
from collections.abc import AsyncGenerator, AsyncIterable, Iterable, Mapping
from contextlib import aclosing
from typing import Any

from langchain_core.runnables import RunnableLambda

from conli.chat.state import (
    DECLINED,
    ChatInputs,
    ContextExtractor,
    OnFlag,
    answers_last,
    chat_inputs,
    checked_on_flag,
    checked_update,
)
from conli.chat.state import messages_update as messages_update  # re-exported: their old home
from conli.chat.state import node_output as node_output
from conli.chat.state import reply_text as reply_text
from conli.chat.state import sent as sent
from conli.config import Settings
from conli.errors import InputError
from conli.graph.runner import Prepared
from conli.graph.state import NodeOutput
from conli.models import CheckResult, PairResult
from conli.pipeline import Checker
from conli.run.context import on_pool
from conli.run.inputs import Source
from conli.run.many import OnProgress, Pair, failed, pairs_of, succeeded, unpack
from conli.run.plan import Plan, make_plan
from conli.run.request import RunRequest, StreamRequest
from conli.run.table import PairResults
from conli.streaming import DoneEvent, SentenceEvent


async def acheck(
    source: Source,
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
    plan = _plan(settings)
    request = RunRequest.of(source, response, question=question, points=points,
                            limits=_limits(checker, plan))
    return await _on_pool(checker, request, plan)


async def _on_pool(checker: Checker, request: RunRequest,
                   plan: Plan | Prepared | None) -> CheckResult:
    """``checker.run(request)`` on the checker's pool; a cancel stops it at its next call."""
    return await on_pool(checker.executor(), functools.partial(checker.run, request, plan=plan))


def _limits(checker: Checker, plan: Plan | None) -> Settings:
    """The settings a call's texts are validated within: its plan's, else the checker's."""
    return (plan if plan is not None else checker.plan).settings


async def acheck_many(
    pairs: Iterable[Pair],
    settings: Settings | None = None,
    *,
    checker: Checker | None = None,
    threshold: float | None = None,
    max_concurrency: int | None = None,
    progress: OnProgress | None = None,
) -> PairResults:
    """Async ``Checker.check_many``: one ``PairResult`` per pair, in input order.

    ``pairs`` as ``check_many`` takes them (pairs, RAGAS or DeepEval rows, a DataFrame or
    an HF dataset). With ``checker`` reuse it (``settings`` then override it), else the
    shared checker for ``settings``, as ``acheck``. At most ``max_concurrency`` checks at
    once (default ``Settings.max_concurrency``), each on the checker's pool; ``progress``,
    if given, is called with ``(done, total)`` as each pair finishes. A pair that fails gets
    an error result in its place; cancelling the call stops every check at its next model
    call.
    """
    given = pairs_of(pairs)  # a call's mistake fails before any model is loaded
    if checker is None:
        checker = await asyncio.to_thread(shared_checker, settings)
        settings = None
    ready, limit = await asyncio.to_thread(checker.prepare_many, _plan(settings),
                                           threshold=threshold,
                                           max_concurrency=max_concurrency)
    gate, done = asyncio.Semaphore(limit), [0]

    async def one(index: int) -> PairResult:
        async with gate:
            try:
                fields = unpack(given[index], index, strict=not given.table)
                request = RunRequest.of(**fields, limits=ready.plan.settings)
                outcome = succeeded(index, await _on_pool(checker, request, ready))
            except Exception as exc:  # the pair's error takes its place; the others go on
                outcome = failed(index, exc)
        done[0] += 1
        if progress is not None:
            progress(done[0], len(given))
        return outcome

    results = await asyncio.gather(*(one(i) for i in range(len(given))))
    return PairResults(results, labels=given.labels)


def _plan(settings: Settings | None) -> Plan | None:
    """A hook's per-call ``settings`` as the plan ``Checker`` takes (None: the checker's own)."""
    return None if settings is None else make_plan(settings)


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
    source: Source,
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
    plan = _plan(settings)
    request = StreamRequest.of(source, chunks, limits=_limits(checker, plan), question=question)
    stream = checker.run_stream(request, plan=plan)
    async with aclosing(stream) as events:  # closing this hook closes the stream at once
        async for event in events:
            yield event


# --- conli as one node of a host LangGraph app ------------------------------------------


class CheckNode(RunnableLambda[Mapping[str, Any], NodeOutput]):
    """A LangGraph node: reads the host's state, returns the keys conli writes.

    Sync under ``invoke``/``stream`` (``Checker.check``), async under ``ainvoke``/``astream``
    (``acheck``: a cancelled graph starts no further model call). Calling it runs it sync.
    """

    def __call__(self, state: Mapping[str, Any]) -> NodeOutput:
        """Check ``state``'s response against its source."""
        return self.invoke(state)


def check_node(
    checker: Checker,
    *,
    settings: Settings | None = None,
    response_key: str = "response",
    source_key: str = "source",
    on_flag: OnFlag = "annotate",
    declined: str = DECLINED,
    context_extractor: ContextExtractor | None = None,
) -> CheckNode:
    """A node that checks the state's response against its source.

    The response is the state's ``response_key`` when the state has it, else the last AI
    message's content in ``messages`` (LangGraph's ``MessagesState``: LangChain message
    objects, or dicts with ``role``/``type`` and ``content``). The source is the state's
    ``source_key`` when the state has it (a text, a LangChain ``Document``, or a list of
    them: several sources), else this turn's tool messages (a retriever tool's ``Document``
    artifacts, each a named chunk), else the system messages (``chat.state.chat_inputs``).
    ``question`` is the state's ``question``, else the last human message; ``points`` is
    read if present. ``context_extractor(state)`` replaces that reading: it returns
    ``ChatInputs(source, response, question, points)``. A state that gives no response or
    no source raises ``InputError`` naming its keys; other bad input raises ``InputError``
    before any model call, a backend that cannot be used raises ``BackendError``, and a
    check past its deadline raises ``DeadlineExceededError``. ``settings`` overrides the
    checker's for this node (e.g. detect only), as in ``check``.

    The node writes conli's keys (``node_output``: a state that declares them keeps them)
    and, when the response is the last AI message (not read from ``response_key``), a
    ``messages`` update: that message, same id (``add_messages`` replaces it), carrying the
    text to send (``sent``) and the whole result under ``response_metadata["conli"]``.
    ``on_flag="raise"`` raises ``UnsupportedAnswerError`` instead when the verdict is not
    ``supported``.
    """
    checked_on_flag(on_flag)
    plan = _plan(settings)

    def _read(state: Mapping[str, Any]) -> tuple[RunRequest, bool]:
        """The check's request, and whether the response is the AI message to replace."""
        if context_extractor is None:
            inputs = chat_inputs(state, response_key=response_key, source_key=source_key)
            return inputs.request(_limits(checker, plan)), response_key not in state
        given = context_extractor(state)
        if not isinstance(given, ChatInputs):
            raise InputError(f"check_node's context_extractor returned "
                             f"{type(given).__name__}, not ChatInputs(source, response, ...)")
        return given.request(_limits(checker, plan)), answers_last(state, given.response)

    def _written(state: Mapping[str, Any], result: CheckResult, replace: bool) -> NodeOutput:
        return checked_update(state, result, replace=replace, on_flag=on_flag,
                              declined=declined, door="check_node on_flag='raise'")

    # Annotated as a plain mapping, not a TypedDict: LangGraph would read a TypedDict hint
    # as the node's input schema and hand it only those keys (no ``messages``, no custom key).
    def conli(state: Mapping[str, Any]) -> NodeOutput:
        request, replace = _read(state)
        return _written(state, checker.run(request, plan=plan), replace)

    async def aconli(state: Mapping[str, Any]) -> NodeOutput:
        request, replace = _read(state)
        return _written(state, await _on_pool(checker, request, plan), replace)

    return CheckNode(conli, afunc=aconli, name="conli")
