"""A cap on the size of a hosted provider's reply, enforced in the SDK's HTTP client, SDK-free.

The ``openai`` and ``anthropic`` SDKs read a whole reply body into memory, so a misbehaving
server sending a huge or endless body could exhaust it. ``capped_http_client`` builds the
SDK's own HTTP client (its ``DefaultHttpxClient``: ``httpx`` in older SDK releases, ``httpx2``
in newer ones, which also refuse an ``httpx`` client) with two event hooks:

* on the request, ``Accept-Encoding: identity``: only an uncompressed body has a size we
  can cap (a few KiB of gzip can inflate to gigabytes), and chat replies are small anyway;
* on the response, before any body byte is read: a declared ``Content-Length`` over the cap,
  or a ``Content-Encoding`` after all, is refused at once; otherwise the raw byte stream is
  wrapped to count bytes and raise as soon as the count passes the cap. The failing read
  closes the response, so the connection is dropped and the rest is never read.

Hooks rather than a custom transport: passing ``transport=`` to the client would switch off
its proxy settings from the environment (``HTTPS_PROXY``) and its connection limits.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from conli.errors import ReplyTooLargeError

# Our calls ask for at most a few thousand tokens, a reply of tens of KiB: 4 MiB is ~100x that.
MAX_REPLY_BYTES = 4 * 1024 * 1024


def reply_cap_error(exc: BaseException) -> ReplyTooLargeError | None:
    """The ``ReplyTooLargeError`` behind ``exc``, which an SDK may wrap as a connection error."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ReplyTooLargeError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


class _ByteStream(Protocol):
    """The part of ``httpx.SyncByteStream`` (and ``httpx2``'s) the counter wraps."""

    def __iter__(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class _CountingStream:
    """A response's raw byte stream that raises ``ReplyTooLargeError`` once past the cap."""

    def __init__(self, inner: _ByteStream, provider: str, cap: int) -> None:
        self._inner = inner
        self._provider = provider
        self._cap = cap

    def __iter__(self) -> Iterator[bytes]:
        """Yield the inner stream's chunks, stopping at the first one that passes the cap."""
        received = 0
        for chunk in self._inner:
            received += len(chunk)
            if received > self._cap:
                raise ReplyTooLargeError(
                    f"{self._provider} sent a reply over the {_mib(self._cap)} cap "
                    f"({received} bytes and counting); stopped reading it"
                )
            yield chunk

    def close(self) -> None:
        """Close the inner stream; unread, it drops the connection instead of draining it."""
        self._inner.close()


@functools.cache
def _counting_type(base: type) -> type:
    """``_CountingStream`` as a subclass of the HTTP library's ``SyncByteStream``.

    The clients check ``isinstance(response.stream, SyncByteStream)``; the library is the
    one that built the response, ``httpx`` or ``httpx2``, so the subclass is made per base.
    """
    return type("CountingStream", (_CountingStream, base), {})


def _ask_identity(request: Any) -> None:
    """Request hook: ask for an uncompressed body, the only kind whose size is capped."""
    request.headers["Accept-Encoding"] = "identity"


class _ReplyCap:
    """Response hook: refuse an oversize or compressed reply, else count the body's bytes."""

    def __init__(self, provider: str, cap: int) -> None:
        self._provider = provider
        self._cap = cap

    def __call__(self, response: Any) -> None:
        """Check the headers before any body byte is read, then wrap the raw stream."""
        cap = _mib(self._cap)
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            raise ReplyTooLargeError(
                f"{self._provider} sent a {encoding}-encoded reply although conli asked for an "
                f"uncompressed one; refused, as its size once decoded cannot be held to the "
                f"{cap} cap"
            )
        declared = response.headers.get("content-length", "")
        if declared.strip().isdigit() and int(declared) > self._cap:
            raise ReplyTooLargeError(
                f"{self._provider} sent a reply over the {cap} cap (it declares "
                f"{int(declared)} bytes); refused without reading it"
            )
        library = sys.modules[type(response).__module__.partition(".")[0]]
        counting = _counting_type(library.SyncByteStream)
        response.stream = counting(response.stream, self._provider, self._cap)


def capped_http_client(
    factory: Callable[..., Any], provider: str, cap: int = MAX_REPLY_BYTES
) -> Any:
    """``factory(...)`` (an SDK's ``DefaultHttpxClient``) refusing replies over ``cap`` bytes."""
    return factory(event_hooks={"request": [_ask_identity], "response": [_ReplyCap(provider, cap)]})
