"""The NDJSON protocol of ``POST /v1/check/stream``: its request lines and its answer lines.

The request is read line by line as it arrives (an opening line with the source, then
chunks of the reply) and fed to ``streaming.stream_check``; each event it yields is one
answer line, and a failure after the stream began is a last ``error`` line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable, Coroutine
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from conli import errors
from conli.inputs import decode_text
from conli.streaming import OPENING_LINE, DoneEvent, Events, SentenceEvent

log = logging.getLogger("conli.streaming")

class ErrorEvent(BaseModel):
    """Over HTTP: the stream failed after it began (RFC 9457 problem fields); the last line."""

    event: Literal["error"] = "error"
    type: str = Field(description="a URI naming the kind of problem, as in the problem answers")
    title: str
    status: int = Field(description="the HTTP status the same failure gets from /v1/check")
    detail: str = ""
    retry_after: int | None = Field(None, description="seconds to wait before retrying (503)")


StreamLine = Annotated[SentenceEvent | DoneEvent | ErrorEvent, Field(discriminator="event")]


class StreamClosed(Exception):
    """The client went away mid-stream: nothing more to check, and nobody to tell."""


class StreamIdleError(errors.InputError):
    """The client sent nothing for too long: the stream is ended (422 by the one table)."""


async def idle_limited(body: AsyncIterable[bytes], idle: float) -> AsyncIterator[bytes]:
    """``body``'s chunks, ended with ``StreamIdleError`` once none arrives for ``idle`` s.

    A client that opens a stream and goes quiet would otherwise hold its slot (and a
    connection) until the request's whole time limit.
    """
    chunks = aiter(body)
    while True:
        try:
            chunk = await asyncio.wait_for(anext(chunks), idle)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise StreamIdleError(f"the client sent nothing for {idle:g}s "
                                  "(CONLI_SERVICE_STREAM_IDLE_SECONDS); the stream was ended"
                                  ) from None
        yield chunk


class StreamOpening(BaseModel):
    """The first line of a streamed request: what the reply must be faithful to."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "source": "The Riverside Public Library opened in 1962 and is run by the city council.",
        "question": "Who runs the library?",
    }]})

    source: str = Field(description="the document the reply must be faithful to")
    question: str | None = Field(None, description="the question the reply answers, if any")


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
    lines: AsyncIterator[bytes],
) -> tuple[StreamOpening, AsyncGenerator[str, None]]:
    """Read the opening line; return it and the reply's chunks, read as they arrive."""
    first = await anext(lines, None)
    if first is None:
        raise errors.EmptyInputError(f"the body is empty; its first line is {OPENING_LINE}")
    return _parsed(StreamOpening, first, 1), _chunks(lines)


async def _chunks(lines: AsyncIterator[bytes]) -> AsyncGenerator[str, None]:
    number = 1
    async for line in lines:
        number += 1
        yield _parsed(StreamChunk, line, number).text


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
    """

    def __init__(self, events: Events, *, timeout: float, retry_after: int,
                 left: Coroutine[Any, Any, None], on_end: Callable[[], None]) -> None:
        self.timeout, self.retry_after = timeout, retry_after
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
