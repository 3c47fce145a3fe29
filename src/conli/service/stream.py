"""The NDJSON protocol of ``POST /v1/check/stream``: its request lines and its answer lines.

The request is read line by line as it arrives (an opening line with the source, then
chunks of the reply) and fed to ``streaming.stream_check``; each event it yields is one
answer line, and a failure after the stream began is a last ``error`` line. How long the
client may keep the server waiting is ``ClientPace``'s to say.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterator,
)
from contextlib import contextmanager
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from conli import errors
from conli.run.inputs import blank, decode_text, shows_nothing
from conli.streaming import OPENING_LINE, DoneEvent, Events, SentenceEvent

log = logging.getLogger("conli.streaming")
_SPACES = re.compile(r"\s+")  # a run of whitespace is one character of the reply's pace

class ErrorEvent(BaseModel):
    """Over HTTP: the stream failed after it began (RFC 9457 problem fields); the last line."""

    event: Literal["error"] = "error"
    type: str = Field(description="a URI naming the kind of problem, as in the problem answers")
    title: str
    status: int = Field(description="the HTTP status the same failure gets from /v1/check")
    detail: str = ""
    retry_after: int | None = Field(
        default=None, description="seconds to wait before retrying (503)")


StreamLine = Annotated[SentenceEvent | DoneEvent | ErrorEvent, Field(discriminator="event")]


class StreamClosed(Exception):
    """The client went away mid-stream: nothing more to check, and nobody to tell."""


class StreamIdleError(errors.InputError):
    """The client kept the stream waiting too long: it is ended (422 by the one table)."""


class Activity:
    """What the server has in progress on one stream: checks running, verdicts unsent.

    A client that sends a sentence and waits for its verdict before it sends more is
    waiting on the server, not idle: ``ClientPace`` stops its clock while anything is in
    progress. The stream marks its checks (``busy``), the ``Relay`` its unsent lines.
    Used from the event loop only.
    """

    def __init__(self) -> None:
        self.working = 0
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def idle(self) -> bool:
        """Nothing is in progress: what happens next is up to the client."""
        return self.working == 0

    @contextmanager
    def busy(self) -> Iterator[None]:
        """In progress for the ``with`` block's length."""
        self.begin()
        try:
            yield
        finally:
            self.end()

    def begin(self) -> None:
        """One more piece of work is in progress."""
        self._change(+1)

    def end(self) -> None:
        """One piece of work is done."""
        self._change(-1)

    def changed(self) -> asyncio.Future[None]:
        """A future done at the next ``begin`` or ``end`` (cancel it to stop waiting)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters = [*(w for w in self._waiters if not w.done()), waiter]  # none piles up
        return waiter

    def _change(self, by: int) -> None:
        self.working += by
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


class ClientPace:
    """How long a stream has kept the server waiting on its client, and how long it may.

    Only waiting counts: time in which the server has nothing in progress on the stream
    (``Activity``: no check running, no verdict unsent). A client that waits for each
    verdict before it sends more is never idle, however long a check takes.

    Two limits end a stream. The idle limit: no chunk for ``idle`` seconds of waiting. And,
    once the stream holds a slot, a minimum rate: beyond its first ``idle`` seconds of
    waiting, the client must send ``min_rate`` characters of the reply for every further
    second it keeps the server waiting (in all it may wait ``idle + characters / min_rate``
    seconds; Apache's mod_reqtimeout ``MinRate`` works so). A rate, not a total budget:
    a long reply keeps the server waiting longer than a short one, so any fixed budget
    would cut long replies from slow models or else let a stream that sends a word every
    ten seconds hold its slot just as long. The rate lets through every model that streams
    a token a second or faster, however long its reply, and cuts such a trickle soon after
    its first ``idle`` seconds. The stream's time limit still bounds everything.
    """

    def __init__(self, activity: Activity, *, idle: float, min_rate: float) -> None:
        self.activity, self.idle, self.min_rate = activity, idle, min_rate
        self.waited = 0.0  # seconds of waiting since the stream took its slot
        self.chars = 0  # characters of the reply received since then
        self.rated = False  # the rate applies once the stream holds a slot

    def hold_slot(self) -> None:
        """The stream took its slot: from now on the rate applies too."""
        self.rated, self.waited, self.chars = True, 0.0, 0

    def credit(self, text: str) -> None:
        """Count a chunk of the reply that arrived, each run of whitespace as one character.

        Characters that show nothing (zero-width spaces, soft hyphens: ``shows_nothing``)
        count nothing, and a chunk of whitespace alone counts nothing: a stream of them
        sends no reply, and padding cannot buy a trickle its slot.
        """
        if text and not blank(text):
            shown = "".join(char for char in text if not shows_nothing(char))
            self.chars += len(_SPACES.sub(" ", shown))

    async def next(self, chunks: AsyncIterator[bytes]) -> bytes | None:
        """The next chunk of the body (None: it ended), or ``StreamIdleError`` at a limit."""
        left = self._left()
        by_rate = left < self.idle
        task: asyncio.Task[bytes | None] = asyncio.ensure_future(anext(chunks, None))
        try:
            self.waited += await _waited(task, self.activity, max(min(left, self.idle), 0.0))
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait([task])
        if task.cancelled():
            raise self._too_slow() if by_rate else StreamIdleError(
                f"the client sent nothing for {self.idle:g}s "
                "(CONLI_SERVICE_STREAM_IDLE_SECONDS); the stream was ended")
        return task.result()

    def _left(self) -> float:
        """Seconds of waiting left before the rate ends the stream (inf: not yet rated)."""
        if not self.rated:
            return float("inf")
        return self.idle + self.chars / self.min_rate - self.waited

    def _too_slow(self) -> StreamIdleError:
        return StreamIdleError(
            f"the client sent {self.chars:,} characters of the reply in {self.waited:.0f}s of "
            f"keeping the server waiting: under {self.min_rate:g} a second beyond the first "
            f"{self.idle:g}s (CONLI_SERVICE_STREAM_MIN_RATE); the stream was ended to free its "
            "slot")


async def _waited(task: asyncio.Future[Any], activity: Activity, allowed: float) -> float:
    """Wait for ``task`` for at most ``allowed`` seconds of waiting; return the seconds waited.

    The clock stops while ``activity`` has anything in progress.
    """
    loop = asyncio.get_running_loop()
    waited = 0.0
    while not task.done() and waited < allowed:
        change = activity.changed()
        counting = activity.idle
        started = loop.time()
        try:
            await asyncio.wait([task, change], timeout=allowed - waited if counting else None,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            change.cancel()
        if counting:
            waited += loop.time() - started
    return waited


async def paced(body: AsyncIterable[bytes], pace: ClientPace) -> AsyncIterator[bytes]:
    """``body``'s chunks; ``StreamIdleError`` once the client has kept the server waiting too long.

    ``pace`` says how long is too long. A client that opens a stream and goes quiet, or
    sends a word now and then, would otherwise hold its slot (and a connection) until the
    request's whole time limit.
    """
    chunks = aiter(body)
    while (chunk := await pace.next(chunks)) is not None:
        yield chunk


class StreamOpening(BaseModel):
    """The first line of a streamed request: what the reply must be faithful to."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "source": "The Riverside Public Library opened in 1962 and is run by the city council.",
        "question": "Who runs the library?",
    }]})

    source: str | list[str] = Field(
        description="the document the reply must be faithful to, or a list of sources")
    question: str | None = Field(default=None, description="the question the reply answers, if any")


class StreamChunk(BaseModel):
    """Every later line: the next chunk of the reply, as the chat model streamed it."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"text": "The library opened in 19"},
    ]})

    text: str = Field(description="the chunk, appended to the reply as is")


async def ndjson_lines(body: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """The non-blank lines of a byte stream as each completes; the last may lack its newline."""
    buffer = bytearray()
    async for data in body:
        searched = len(buffer)
        buffer += data
        while (newline := buffer.find(b"\n", searched)) >= 0:
            line = bytes(buffer[:newline])
            del buffer[: newline + 1]
            searched = 0
            if line.strip():
                yield line
    if buffer.strip():
        yield bytes(buffer)


async def read_request(
    lines: AsyncIterator[bytes], pace: ClientPace | None = None,
) -> tuple[StreamOpening, AsyncGenerator[str, None]]:
    """Read the opening line; return it and the reply's chunks, read as they arrive.

    Each chunk of the reply is credited to ``pace`` as it is read.
    """
    first = await anext(lines, None)
    if first is None:
        raise errors.EmptyInputError(f"the body is empty; its first line is {OPENING_LINE}")
    return _parsed(StreamOpening, first, 1), _chunks(lines, pace)


async def _chunks(lines: AsyncIterator[bytes], pace: ClientPace | None
                  ) -> AsyncGenerator[str, None]:
    number = 1
    async for line in lines:
        number += 1
        text = _parsed(StreamChunk, line, number).text
        if pace is not None:
            pace.credit(text)
        yield text


Line = TypeVar("Line", StreamOpening, StreamChunk)


def _parsed(model: type[Line], line: bytes, number: int) -> Line:
    """One request line as ``model``; an ``InputError`` names the line and what is wrong."""
    text = decode_text(line, name=f"line {number}")
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "line"
        shape = OPENING_LINE if model is StreamOpening else '{"text": ...}'
        raise errors.InputError(f"line {number} is not {shape}: {where}: {first['msg']}") from None


class Relay:
    """Runs a stream in a task of its own and relays its events as NDJSON lines.

    The task ends when the reply is checked, when the stream fails, or when ``left``
    returns (the client left: no further sentence is checked; one already running
    finishes first); ``on_end`` is called then (the service frees the request's slot).
    A failure after the answer began is one error line; ``timeout`` ends it with a 504 line.
    An event is in progress on ``activity`` from when the stream yields it until its line
    is sent (the one after it is asked for).
    """

    def __init__(self, events: Events, *, timeout: float, retry_after: int,
                 left: Coroutine[Any, Any, None], on_end: Callable[[], None],
                 activity: Activity | None = None) -> None:
        self.timeout, self.retry_after = timeout, retry_after
        self.activity = activity or Activity()
        self.queue: asyncio.Queue[SentenceEvent | DoneEvent | BaseException | None] = (
            asyncio.Queue()
        )
        self.task = asyncio.create_task(self._pump(events))
        self.task.add_done_callback(lambda _: on_end())
        self.watch = asyncio.create_task(left)
        self.watch.add_done_callback(lambda _: self.task.cancel())

    async def _pump(self, events: Events) -> None:
        try:
            async for event in events:
                self.activity.begin()  # unsent until ``lines`` is asked for the next line
                self.queue.put_nowait(event)
        except Exception as exc:
            self.queue.put_nowait(exc)
        finally:
            self.queue.put_nowait(None)

    async def lines(self) -> AsyncIterator[bytes]:
        """One line per event, until the summary, an error, or the time limit."""
        loop = asyncio.get_running_loop()
        ends = loop.time() + self.timeout
        try:
            while (line := await self._next(ends - loop.time())) is not None:
                yield line.model_dump_json().encode() + b"\n"
                if isinstance(line, ErrorEvent):
                    return
                self.activity.end()  # sent: the line after it is asked for
        finally:
            self.watch.cancel()
            self.task.cancel()

    async def _next(self, left: float) -> SentenceEvent | DoneEvent | ErrorEvent | None:
        try:
            item = await asyncio.wait_for(self.queue.get(), left)
        except TimeoutError:
            return ErrorEvent(type="urn:conli:problem:timeout", status=504,
                              title="the check took too long",
                              detail=f"the limit is {self.timeout:g}s")
        if isinstance(item, BaseException):
            return error_event(item, retry_after=self.retry_after)
        return item


def error_event(exc: BaseException, *, retry_after: int) -> ErrorEvent | None:
    """The line for a stream that failed after its answer began (None: the client left).

    Statuses come from the one table, ``errors.boundary``, as ``/v1/check``'s do.
    """
    if isinstance(exc, StreamClosed):
        return None
    answer = errors.boundary(exc)
    if answer is errors.UNEXPECTED:
        log.error("unexpected error in a stream", exc_info=exc)
    return ErrorEvent(type=f"urn:conli:problem:{answer.slug}", title=answer.title,
                      status=answer.http_status,
                      detail=str(exc) if isinstance(exc, errors.ConliError) else "",
                      retry_after=retry_seconds(exc, retry_after)
                      if answer.http_status == 503 else None)


def retry_seconds(exc: BaseException, default: int) -> int:
    """Seconds to wait after a 503: the provider's ``Retry-After`` if it gave one."""
    return max(1, round(getattr(exc, "retry_after", None) or default))
