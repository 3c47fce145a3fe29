"""``POST /v1/check/stream`` from the client's side: a bare HTTP/1.1 client that sends while
it reads, and the settings and runner the stream tests share."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from pydantic import TypeAdapter

from conli.config import Settings
from conli.service.stream import StreamLine
from tests.support.service import KEY

STREAM = "/v1/check/stream"
LINES: TypeAdapter[Any] = TypeAdapter(StreamLine)
HTTP_SOURCE = "The Riverside library opened in 1962. The city council runs it. It has a cafe."


class RawStream:
    """A bare HTTP/1.1 client: sends a chunked NDJSON body and reads the answer meanwhile.

    httpx sends the whole request body before it reads the response, so it cannot show
    that a verdict arrives while the body is still being sent; this client can.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.buffer = b""
        self.status = 0
        self.headers: dict[str, str] = {}

    @classmethod
    async def open(cls, base: str, *, key: str | None = KEY) -> RawStream:
        url = urlsplit(base)
        assert url.hostname is not None and url.port is not None
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        auth = f"X-API-Key: {key}\r\n" if key else ""
        writer.write((f"POST {STREAM} HTTP/1.1\r\nHost: {url.netloc}\r\n{auth}"
                      "Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
                      ).encode())
        await writer.drain()
        return cls(reader, writer)

    async def send(self, line: dict[str, Any] | bytes) -> None:
        data = line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n"
        self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await self.writer.drain()

    async def end(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()

    async def head(self) -> int:
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 10)
        status_line, *fields = head.decode().split("\r\n")
        self.status = int(status_line.split()[1])
        self.headers = {k.lower(): v.strip() for k, _, v in (f.partition(":") for f in fields if f)}
        return self.status

    async def body(self) -> bytes:
        """The whole answer body (after ``head``), chunked or sized."""
        if "content-length" in self.headers:
            return await self.reader.readexactly(int(self.headers["content-length"]))
        while (line := await self.line()) is not None:
            self.buffer = json.dumps(line).encode()
        return self.buffer

    async def line(self) -> dict[str, Any] | None:
        """The next NDJSON line of a chunked answer; None at its end."""
        while b"\n" not in self.buffer:
            size = int((await asyncio.wait_for(self.reader.readline(), 10)).strip() or b"0", 16)
            if size == 0:
                return None
            self.buffer += await self.reader.readexactly(size)
            await self.reader.readexactly(2)
        line, _, self.buffer = self.buffer.partition(b"\n")
        parsed: dict[str, Any] = json.loads(line)
        LINES.validate_python(parsed)  # every line is one of the documented events
        return parsed

    async def rest(self) -> list[dict[str, Any]]:
        lines = []
        while (line := await self.line()) is not None:
            lines.append(line)
        return lines

    def abort(self) -> None:
        self.writer.transport.abort()


def _settings(**update: Any) -> Settings:
    return Settings(service_api_keys=[KEY], **update)


def _run(coroutine: Callable[[], Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine(), 30))


async def _send_every(client: RawStream, seconds: float, text: str, times: int) -> None:
    """Send ``{"text": text}`` every ``seconds``, ``times`` times or until the server hangs up."""
    try:
        for _ in range(times):
            await client.send({"text": text})
            await asyncio.sleep(seconds)
    except (ConnectionError, OSError):
        return
