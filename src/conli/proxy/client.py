"""A drop-in guard for apps that keep their own OpenAI client: its replies checked in process.

``GuardedOpenAI(OpenAI())`` (or ``AsyncGuardedOpenAI(AsyncOpenAI())``, or any client of the
``openai`` SDK: Azure's, one pointed at vLLM) is the client with
``chat.completions.create`` checking each reply as the proxy does: the sources from
``extra_body={"conli": {...}}`` (which never reaches the model), the turn's tool messages,
the system message where the policy allows it, or an ``X-Conli-Source`` extra header;
``on_flag`` applied; the result on the response (``response.conli``, on the last chunk
when streamed). Everything else is the wrapped client's. The SDK's own types are reused
(the chunks are built as the upstream's class), so this module imports no SDK.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from conli.config import Settings
from conli.errors import ConliError, UnsupportedRequestError
from conli.hook import shared_checker
from conli.models import CheckResult
from conli.pipeline import Checker
from conli.proxy.release import released
from conli.proxy.verdicts import (
    BLOCKED_FINISH,
    Policy,
    Verdicts,
    decided,
    refuse_early,
    unchecked,
)
from conli.proxy.wire import NO_SOURCE, SOURCE_HEADER, Turn, read_turn
from conli.run.context import on_pool
from conli.run.request import RunRequest

TOOL_CALL = "the reply is a tool call: nothing to check (the answer after the tool results is)"


class _Guard:
    """What both clients share: the checker, the policy, and reading a call into a check."""

    def __init__(self, client: Any, checker: Checker | None, settings: Settings | None,
                 policy: Policy | None) -> None:
        self._client = client
        self.checker = checker or shared_checker(settings)
        self.policy = policy or Policy.of(self.checker.settings)

    def __getattr__(self, name: str) -> Any:
        """Everything but ``chat.completions.create`` is the wrapped client's."""
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._client, name)

    def read(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], Turn, Policy]:
        """The call as the wrapped client sends it (no ``conli``), its check, and the policy."""
        sent = dict(kwargs)
        extra = dict(sent.get("extra_body") or {})
        given = extra.pop("conli", None)
        sent["extra_body"] = extra or None
        headers = dict(sent.get("extra_headers") or {})
        header_sources = [str(v) for k, v in headers.items() if k.lower() == SOURCE_HEADER.lower()]
        sent["extra_headers"] = {k: v for k, v in headers.items()
                                 if k.lower() != SOURCE_HEADER.lower()} or None
        if sent.get("n") not in (None, 1):
            raise UnsupportedRequestError("n > 1: conli checks one reply per call", param="n")
        turn = read_turn({"messages": list(sent.get("messages") or []), "conli": given},
                         header_sources, system_as_source=self.policy.system_as_source)
        policy = self.policy.for_turn(turn)
        refuse_early(self.checker, turn, policy)
        return {k: v for k, v in sent.items() if v is not None}, turn, policy

    def request(self, turn: Turn, policy: Policy, reply: str) -> RunRequest:
        """The check of a whole reply."""
        return RunRequest.of(turn.sources, reply, limits=self.checker.settings,
                             question=turn.question, options=policy.options(turn))

    def apply(self, response: Any, text: str, verdicts: Verdicts) -> Any:
        """The response with the text to send, ``finish_reason`` if blocked, and ``conli``."""
        choice = response.choices[0]
        choice.message.content = text
        if verdicts.action == "blocked":
            choice.finish_reason = BLOCKED_FINISH
        response.conli = verdicts.model_dump(mode="json")
        return response

    def settled(self, response: Any, turn: Turn, policy: Policy,
                result: CheckResult | ConliError | None) -> Any:
        """The response after its check (``result``; None: nothing could be checked)."""
        choice = response.choices[0]
        reply = choice.message.content or ""
        if result is None:
            why = (TOOL_CALL if choice.message.tool_calls else NO_SOURCE
                   if turn.sources is None else "the reply is empty: nothing to check")
            return self.apply(response, reply, unchecked(why, policy, turn.found_in))
        if isinstance(result, ConliError):
            if policy.on_check_error == "refuse":
                raise result
            return self.apply(response, reply, unchecked(
                f"the check failed, the reply went out unchecked: {type(result).__name__}: "
                f"{result}", policy, turn.found_in))
        text, verdicts = decided(result, reply, policy, turn.found_in)
        return self.apply(response, text, verdicts)

    @staticmethod
    def checkable(response: Any, turn: Turn) -> str | None:
        """The reply's text, when there is one to check against sources."""
        message = response.choices[0].message
        text = message.content or ""
        return text if turn.sources is not None and not message.tool_calls and text.strip() \
            else None


class _Completions:
    def __init__(self, create: Callable[..., Any]) -> None:
        self.create = create


class _Chat:
    def __init__(self, create: Callable[..., Any]) -> None:
        self.completions = _Completions(create)


class GuardedOpenAI(_Guard):
    """An ``openai.OpenAI`` client whose ``chat.completions.create`` checks each reply.

    ``checker`` (default: the shared one for ``settings``) checks; ``policy`` (default: the
    checker's ``ProxySettings``) says what goes out. A failed check raises its
    ``ConliError`` (the policy's ``refuse``) or marks the reply unchecked (``pass``).
    """

    def __init__(self, client: Any, *, checker: Checker | None = None,
                 settings: Settings | None = None, policy: Policy | None = None) -> None:
        super().__init__(client, checker, settings, policy)
        self.chat = _Chat(self._create)

    def _create(self, **kwargs: Any) -> Any:
        sent, turn, policy = self.read(kwargs)
        if sent.get("stream"):
            return _SyncStream(functools.partial(self._astream, sent, turn, policy))
        response = self._client.chat.completions.create(**sent)
        reply = self.checkable(response, turn)
        outcome: CheckResult | ConliError | None = None
        if reply is not None:
            try:
                outcome = policy.run(self.checker, self.request(turn, policy, reply))
            except ConliError as exc:
                outcome = exc
        return self.settled(response, turn, policy, outcome)

    async def _astream(self, sent: dict[str, Any], turn: Turn,
                       policy: Policy) -> AsyncIterator[Any]:
        stream = await asyncio.to_thread(self._client.chat.completions.create, **sent)
        async for chunk in _chunks(self, _deltas_of_sync(stream), turn, policy):
            yield chunk


class AsyncGuardedOpenAI(_Guard):
    """An ``openai.AsyncOpenAI`` client whose ``chat.completions.create`` checks each reply.

    As ``GuardedOpenAI``; checks run on the checker's pool, and cancelling the call (or
    closing its stream) stops the check at its next model call and closes the upstream's.
    """

    def __init__(self, client: Any, *, checker: Checker | None = None,
                 settings: Settings | None = None, policy: Policy | None = None) -> None:
        super().__init__(client, checker, settings, policy)
        self.chat = _Chat(self._create)

    async def _create(self, **kwargs: Any) -> Any:
        sent, turn, policy = self.read(kwargs)
        if sent.get("stream"):
            stream = await self._client.chat.completions.create(**sent)
            return _AsyncStream(_chunks(self, _deltas(stream), turn, policy))
        response = await self._client.chat.completions.create(**sent)
        reply = self.checkable(response, turn)
        outcome: CheckResult | ConliError | None = None
        if reply is not None:
            try:
                outcome = await on_pool(self.checker.executor(), functools.partial(
                    policy.run, self.checker, self.request(turn, policy, reply)))
            except ConliError as exc:
                outcome = exc
        return self.settled(response, turn, policy, outcome)


class _Upstream:
    """What the upstream's chunks said beside their text: the first chunk, finish, usage."""

    def __init__(self) -> None:
        self.first: Any = None
        self.finish: str | None = None
        self.usage: Any = None

    def take(self, chunk: Any) -> Iterator[str]:
        """The text deltas of one chunk; a tool call cannot be checked as it streams."""
        self.first = self.first or chunk
        self.usage = getattr(chunk, "usage", None) or self.usage
        for choice in chunk.choices:
            self.finish = choice.finish_reason or self.finish
            if choice.delta.tool_calls:
                raise UnsupportedRequestError("a tool call in a streamed reply cannot be checked "
                                              "as it streams: ask for tool turns unstreamed",
                                              param="stream")
            if choice.delta.content:
                yield choice.delta.content


async def _chunks(guard: _Guard, deltas: Callable[[_Upstream], AsyncIterator[str]], turn: Turn,
                  policy: Policy) -> AsyncIterator[Any]:
    """The guarded chunks, built as the upstream's class: released text, finish, ``conli``."""
    upstream = _Upstream()
    settings = guard.checker.settings
    items = released(guard.checker, turn, policy, deltas(upstream), settings=settings,
                     max_sentences=settings.max_response_sentences)
    role = True
    async for item in items:
        if upstream.first is None:  # the reply was empty: nothing to build chunks from
            return
        fields = {"id": upstream.first.id, "created": upstream.first.created,
                  "model": upstream.first.model, "object": "chat.completion.chunk"}
        kind = type(upstream.first)
        if isinstance(item, Verdicts):
            finish = BLOCKED_FINISH if item.action == "blocked" else upstream.finish or "stop"
            yield kind.model_validate({**fields, "choices": [
                {"index": 0, "delta": {}, "finish_reason": finish}]})
            usage = upstream.usage.model_dump() if upstream.usage is not None else None
            yield kind.model_validate({**fields, "choices": [], "usage": usage,
                                       "conli": item.model_dump(mode="json")})
            return
        delta = {"role": "assistant", "content": item} if role else {"content": item}
        role = False
        yield kind.model_validate({**fields, "choices": [
            {"index": 0, "delta": delta, "finish_reason": None}]})


def _deltas(stream: Any) -> Callable[[_Upstream], AsyncIterator[str]]:
    """The text of an ``AsyncStream``, closed with the guarded stream."""

    async def read(upstream: _Upstream) -> AsyncIterator[str]:
        try:
            async for chunk in stream:
                for text in upstream.take(chunk):
                    yield text
        finally:
            await stream.close()

    return read


def _deltas_of_sync(stream: Any) -> Callable[[_Upstream], AsyncIterator[str]]:
    """The text of a sync ``Stream``, each chunk read in a worker thread."""

    async def read(upstream: _Upstream) -> AsyncIterator[str]:
        chunks = iter(stream)
        try:
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                for text in upstream.take(chunk):
                    yield text
        finally:
            await asyncio.to_thread(stream.close)

    return read


class _AsyncStream:
    """The guarded chunks as the SDK's ``AsyncStream`` is used: iterated, closed, ``async with``."""

    def __init__(self, items: AsyncIterator[Any]) -> None:
        self._items = items

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._items

    async def __aenter__(self) -> _AsyncStream:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the stream: the model's, and the check."""
        closing = getattr(self._items, "aclose", None)
        if closing is not None:
            await closing()


class _SyncStream:
    """An async stream of chunks iterated from sync code: its own event loop, in a thread."""

    def __init__(self, make: Callable[[], AsyncIterator[Any]]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="conli-guarded-stream")
        self._thread.start()
        self._items = make()
        self._closed = False

    def __iter__(self) -> _SyncStream:
        return self

    def __next__(self) -> Any:
        async def step() -> Any:
            return await anext(self._items)

        try:
            return asyncio.run_coroutine_threadsafe(step(), self._loop).result()
        except StopAsyncIteration:
            self.close()
            raise StopIteration from None

    def __enter__(self) -> _SyncStream:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the stream (the upstream's, and the check) and its loop."""
        if self._closed:
            return
        self._closed = True
        closing = getattr(self._items, "aclose", None)
        if closing is not None:
            asyncio.run_coroutine_threadsafe(closing(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


__all__ = ["AsyncGuardedOpenAI", "GuardedOpenAI"]
