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
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Mapping
from contextlib import aclosing
from typing import Any, Literal, TypeVar

from langchain_core.runnables import RunnableLambda

from conli.config import Settings
from conli.errors import ConfigError, InputError, UnsupportedAnswerError
from conli.graph.state import NodeOutput
from conli.models import CheckResult
from conli.pipeline import Checker
from conli.run.context import cancellable
from conli.run.inputs import Source
from conli.run.plan import Plan, make_plan
from conli.streaming import DoneEvent, SentenceEvent

T = TypeVar("T")


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
    return await in_pool(checker, functools.partial(
        checker.check, source, response, question=question, points=points, plan=_plan(settings)))


async def in_pool(checker: Checker, work: Callable[[], T]) -> T:
    """``work`` (a check on ``checker``) on the checker's own pool, cancellable as ``acheck`` is.

    Cancelling the call stops the check at its next model call (the one in flight ends first).
    """
    flag = threading.Event()
    context = cancellable(flag)  # the caller's context, as asyncio.to_thread copies it
    running = asyncio.get_running_loop().run_in_executor(checker.executor(), context.run, work)
    try:
        return await running
    except asyncio.CancelledError:
        flag.set()  # the thread runs on: no model call starts after this
        raise


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
    stream = checker.astream(source, chunks, question=question, plan=_plan(settings))
    async with aclosing(stream) as events:  # closing this hook closes the stream at once
        async for event in events:
            yield event


# --- conli as one node of a host LangGraph app ------------------------------------------


OnFlag = Literal["annotate", "raise"]
ON_FLAG: tuple[OnFlag, ...] = ("annotate", "raise")
# What a chat node sends when the rewrite removed every sentence: never an empty message.
DECLINED = "I could not give an answer that the source supports."


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
) -> CheckNode:
    """A node that checks the state's response against its source.

    The response is the state's ``response_key`` when the state has it, else the last AI
    message's content in ``messages`` (LangGraph's ``MessagesState``: LangChain message
    objects, or dicts with ``role``/``type`` and ``content``). The source is the state's
    ``source_key`` when the state has it (a text, or a list of texts: several sources), else
    the tool messages' contents after the last human message, each one source. ``question``
    is the state's ``question``, else the last human message; ``points`` is read if
    present. A state that gives no response or no source raises ``InputError`` naming its
    keys; other bad input raises
    ``InputError`` before any model call, a backend that cannot be used raises
    ``BackendError``, and a check past its deadline raises ``DeadlineExceededError``.
    ``settings`` overrides the checker's for this node (e.g. detect only), as in ``check``.

    The node writes conli's keys (``node_output``: a state that declares them keeps them)
    and, when the response came from ``messages``, a ``messages`` update: the AI message it
    checked, same id (``add_messages`` replaces it), carrying the text to send (``sent``)
    and the whole result under ``response_metadata["conli"]``. ``on_flag="raise"`` raises
    ``UnsupportedAnswerError`` instead when the verdict is not ``supported``.
    """
    if on_flag not in ON_FLAG:
        raise ConfigError(f"on_flag must be one of {', '.join(ON_FLAG)}, not {on_flag!r}")

    plan = _plan(settings)

    def _read(state: Mapping[str, Any]) -> tuple[object, object, str | None]:
        return chat_inputs(state, response_key=response_key, source_key=source_key)

    def _written(state: Mapping[str, Any], result: CheckResult) -> NodeOutput:
        if on_flag == "raise" and result.verdict != "supported":
            raise UnsupportedAnswerError(
                f"the answer is {result.verdict}, not supported by its source "
                f"(check_node on_flag='raise'); the result is on this error's .result",
                verdict=result.verdict, result=result.model_dump(mode="json"))
        output = node_output(result)
        if response_key not in state:
            update = messages_update(state.get("messages"), result, declined=declined)
            if update is not None:
                output["messages"] = update
        return output

    # Annotated as a plain mapping, not a TypedDict: LangGraph would read a TypedDict hint
    # as the node's input schema and hand it only those keys (no ``messages``, no custom key).
    def conli(state: Mapping[str, Any]) -> NodeOutput:
        source, response, question = _read(state)
        result = checker.check(
            source,  # type: ignore[arg-type]  # validated in check
            response,  # type: ignore[arg-type]
            question=question,
            points=state.get("points"),
            plan=plan,
        )
        return _written(state, result)

    async def aconli(state: Mapping[str, Any]) -> NodeOutput:
        source, response, question = _read(state)
        result = await acheck(
            source,  # type: ignore[arg-type]  # validated in check
            response,  # type: ignore[arg-type]
            settings, checker=checker, question=question, points=state.get("points"))
        return _written(state, result)

    return CheckNode(conli, afunc=aconli, name="conli")


def sent(result: CheckResult, *, declined: str = DECLINED) -> str:
    """The text a chat node sends after ``result``: the rewrite (or the answer as written).

    When the rewrite removed every sentence, ``declined``: never an empty message. An
    unverified or a detect-only hallucinated answer goes out as written, and its
    ``response_metadata["conli"]`` says so (``on_flag="raise"`` stops it instead).
    """
    return reply_text(result) or declined


def messages_update(messages: object, result: CheckResult, *,
                    declined: str = DECLINED) -> list[Any] | None:
    """The ``messages`` update that replaces the checked AI message; None without one.

    LangChain messages with ids (``MessagesState``'s ``add_messages`` gives each one): the
    one message, same id, so the reducer replaces it. Otherwise (dicts, or no ids) the whole
    list with that message replaced, for a ``messages`` key without that reducer.
    """
    chat = list(messages) if isinstance(messages, list | tuple) else []
    at = next((i for i in range(len(chat) - 1, -1, -1) if _role(chat[i]) == "ai"), None)
    if at is None:
        return None
    checked = chat[at]
    annotation = {"conli": result.model_dump(mode="json")}
    text = sent(result, declined=declined)
    if isinstance(checked, Mapping):
        meta = checked.get("response_metadata")
        replaced: Any = {**checked, "content": text,
                         "response_metadata": {**(meta if isinstance(meta, Mapping) else {}),
                                               **annotation}}
    else:
        meta = getattr(checked, "response_metadata", None)
        replaced = checked.model_copy(update={  # a LangChain message: a pydantic model
            "content": text,
            "response_metadata": {**(meta if isinstance(meta, Mapping) else {}), **annotation}})
        if getattr(checked, "id", None):
            return [replaced]
    return [*chat[:at], replaced, *chat[at + 1:]]


_ROLES = {"human": "human", "user": "human", "ai": "ai", "assistant": "ai",
          "tool": "tool", "function": "tool"}


def _role(message: object) -> str | None:
    """``human``, ``ai`` or ``tool`` for a LangChain message object or a message dict."""
    if isinstance(message, Mapping):
        kind = message.get("role", message.get("type"))
    else:
        kind = getattr(message, "type", None)
    return _ROLES.get(kind) if isinstance(kind, str) else None


def _text(message: object) -> str:
    """A message's text: its string content, or its text blocks joined."""
    content = (message.get("content") if isinstance(message, Mapping)
               else getattr(message, "content", None))
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(block if isinstance(block, str) else str(block.get("text", ""))
                       for block in content
                       if isinstance(block, str) or (isinstance(block, Mapping)
                                                     and block.get("type") == "text"))
    return ""


def turn_of(messages: list[Any]) -> tuple[list[str], str | None]:
    """The last turn of a chat: its tool messages' texts, and the last human message's text.

    The tool messages are those after the last human message (each one source of the
    answer that follows them); the question is that human message (None: there is none).
    """
    roles = [_role(m) for m in messages]
    humans = [i for i, role in enumerate(roles) if role == "human"]
    after = humans[-1] + 1 if humans else 0
    tools = [_text(m) for m, role in zip(messages[after:], roles[after:], strict=True)
             if role == "tool"]
    return tools, (_text(messages[humans[-1]]) or None) if humans else None


def chat_inputs(
    state: Mapping[str, Any], *, response_key: str = "response", source_key: str = "source",
) -> tuple[object, object, str | None]:
    """``(source, response, question)`` as ``check_node`` reads them from ``state``.

    Explicit keys win when the state has them (even empty: ``check`` then refuses them);
    otherwise they come from ``messages``. Raises ``InputError`` naming the state's keys
    when the state gives no response or no source at all.
    """
    messages = state.get("messages")
    chat = list(messages) if isinstance(messages, list | tuple) else []
    tools, asked = turn_of(chat)
    if response_key in state:
        response: object = state[response_key]
    else:
        ai = [m for m in chat if _role(m) == "ai"]
        response = _text(ai[-1]) if ai else None
    if source_key in state:
        source: object = state[source_key]
    else:
        source = (tools[0] if len(tools) == 1 else tools) if tools else None
    question = state.get("question")
    if question is None:
        question = asked
    missing = [name for name, value in (("response", response), ("source", source))
               if value is None]
    if missing:
        raise InputError(
            f"check_node found no {' and no '.join(missing)} in the state (its keys: "
            f"{sorted(map(str, state))}); it reads the response from {response_key!r}, else "
            f"the last AI message in 'messages', and the source from {source_key!r}, else "
            f"the tool messages after the last human message in 'messages'")
    return source, response, question if isinstance(question, str) else None


def reply_text(result: CheckResult | Mapping[str, object]) -> str | None:
    """The text to send after a check: the rewrite, or None when it is empty.

    ``result`` is a ``CheckResult`` or the state ``check_node`` wrote (its ``check_result``,
    else its ``refined_text``). When every sentence was removed the rewrite is empty: None
    tells the app to fall back (a refusal, say) rather than send an empty message.
    """
    if not isinstance(result, CheckResult):
        whole = result.get("check_result")
        text = (whole.refined_text if isinstance(whole, CheckResult)
                else result.get("refined_text"))
    else:
        text = result.refined_text
    return text.strip() if isinstance(text, str) and text.strip() else None


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
