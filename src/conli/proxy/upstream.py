"""The upstream's reply to one streamed request, read in a worker thread as it is written.

An upstream that streams (``backends.base.StreamsText``: the OpenAI-compatible ones) is
read delta by delta, so its reply is checked while it is written; any other is asked for
the whole reply, which then arrives as one delta. ``stop`` (the client left) ends the
reading at the next delta and closes the call, so the upstream stops writing.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Executor

from conli.backends.base import Backend, Completion, CompletionRequest, streams_text

_END = object()  # the reading ended


class Reading:
    """One reply read from ``upstream`` in ``pool``: its deltas, then its ``Completion``."""

    def __init__(self, upstream: Backend, ask: CompletionRequest, pool: Executor) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[object] = asyncio.Queue()
        self.completion: Completion | None = None  # once the whole reply is in
        self._stop = threading.Event()
        self._head: list[object] = []
        self.thread = self.loop.run_in_executor(pool, self._read, upstream, ask)

    def _read(self, upstream: Backend, ask: CompletionRequest) -> None:
        streamer = streams_text(upstream)
        items = streamer.stream(ask) if streamer is not None else _whole(upstream, ask)
        try:
            for item in items:
                if self._stop.is_set():
                    return
                self._put(item)
        except BaseException as exc:  # handed to the reader, as it is
            self._put(exc)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()  # a streamed call: the connection closes, the upstream stops writing
            self._put(_END)

    def _put(self, item: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is reading
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)

    async def begun(self) -> None:
        """Wait for the reply's first delta; raise the upstream's failure if it comes first."""
        item = await self.queue.get()
        if isinstance(item, BaseException):
            raise item
        self._head.append(item)

    async def deltas(self) -> AsyncIterator[str]:
        """The reply's text as it comes; the upstream's failure is raised here."""
        while True:
            item = self._head.pop() if self._head else await self.queue.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, Completion):
                self.completion = item
            elif isinstance(item, str) and item:
                yield item

    def stop(self) -> bool:
        """Stop reading at the next delta, and close the upstream's call (False: stopped)."""
        if self._stop.is_set():
            return False
        self._stop.set()
        return True


def _whole(upstream: Backend, ask: CompletionRequest) -> Iterator[str | Completion]:
    """A reply asked for whole, as one delta and its completion."""
    completion = upstream.complete(ask)
    yield completion.text
    yield completion
