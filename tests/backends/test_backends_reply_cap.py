"""Hosted backends refuse a reply body over the size cap without reading the rest of it.

A raw-socket loopback server streams a body far larger than the cap, paced so that the
whole of it would take seconds; the client must fail fast with conli's error and close
the connection while the server is still sending.
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conli.backends import CompletionRequest as ModelRequest
from conli.backends import get_backend
from conli.backends.base import Backend
from conli.config import Settings
from conli.errors import BackendError, TransientBackendError
from tests.support.http_fakes import Reply, Request, anthropic_message, openai_chat, serve

CAP = 4 * 1024 * 1024  # the cap the backends are expected to enforce (http_limits)
PIECE = 64 * 1024
TOTAL = 64 * CAP // 4  # 64 MiB: 16x the cap
PACE = 0.004  # seconds between pieces: 16 MiB/s, so the whole body would take 4 s
PROVIDERS = ["vllm", "openai", "azure", "anthropic"]


class RawServer:
    """Answers one HTTP request on loopback with a scripted head and body, piece by piece."""

    def __init__(self, head: bytes, pieces: Iterator[bytes], pace: float = 0.0) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._head, self._pieces, self._pace = head, pieces, pace
        self.request_head = b""
        self.sent = 0
        self.outcome: str | None = None  # "finished" or "closed by client"
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"http://{host}:{port}"

    def _run(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(30)
            self.request_head = self._read_request(conn)
            try:
                conn.sendall(self._head)
                for piece in self._pieces:
                    conn.sendall(piece)
                    self.sent += len(piece)
                    if self._pace:
                        time.sleep(self._pace)
                self.outcome = "finished"
            except OSError:
                self.outcome = "closed by client"
        self.done.set()

    @staticmethod
    def _read_request(conn: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            body += conn.recv(65536)
        return head

    def close(self) -> None:
        self._listener.close()


def _head(headers: dict[str, str]) -> bytes:
    lines = ["HTTP/1.1 200 OK", "Content-Type: application/json", *(
        f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _filler(total: int) -> Iterator[bytes]:
    """A JSON-looking body that never closes: ``{"id": "x", "pad": "aaaa...``."""
    first = b'{"id": "x", "pad": "'
    yield first + b"a" * (PIECE - len(first))
    for _ in range(total // PIECE - 1):
        yield b"a" * PIECE


def _chunked(pieces: Iterator[bytes], end: bool = True) -> Iterator[bytes]:
    for piece in pieces:
        yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    if end:
        yield b"0\r\n\r\n"


def _backend(provider: str, url: str, monkeypatch: pytest.MonkeyPatch) -> Backend:
    """The hosted backend ``provider`` pointed at ``url``, as the CLI would build it."""
    settings = Settings(request_timeout=20.0)
    if provider == "vllm":
        monkeypatch.delenv("VLLM_API_KEY", raising=False)
        return get_backend(f"vllm:{url}/v1#m", settings)
    if provider == "openai":
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        return get_backend("openai:gpt-test", settings)
    if provider == "azure":
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-test-key")
        monkeypatch.delenv("AZURE_OPENAI_AD_TOKEN", raising=False)
        settings = Settings(request_timeout=20.0, azure_openai_endpoint=url)
        return get_backend("azure:deployment", settings)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    return get_backend("anthropic:claude-test", settings)


def _answer(provider: str, text: str) -> dict[str, Any]:
    return anthropic_message(text=text) if provider == "anthropic" else openai_chat(text)


def _call(backend: Backend) -> str:
    ask = ModelRequest([{"role": "user", "content": "Say ok."}], max_tokens=16)
    return backend.complete(ask).text


@pytest.fixture
def raw_server() -> Iterator[Callable[..., RawServer]]:
    made: list[RawServer] = []

    def start(head: bytes, pieces: Iterator[bytes], pace: float = 0.0) -> RawServer:
        server = RawServer(head, pieces, pace)
        made.append(server)
        return server

    yield start
    for server in made:
        server.close()


def _assert_refused_early(provider: str, server: RawServer, backend: Backend) -> BackendError:
    """The call fails fast with a non-transient BackendError naming provider and cap."""
    started = time.monotonic()
    with pytest.raises(BackendError) as caught:
        _call(backend)
    elapsed = time.monotonic() - started
    backend.close()
    assert server.done.wait(10), "the server never finished its reply"
    error = caught.value
    assert not isinstance(error, TransientBackendError), repr(error)
    assert provider in str(error) and "4 MiB" in str(error), str(error)
    assert server.outcome == "closed by client"  # it hung up while the server still sent
    assert server.sent < TOTAL // 2, server.sent
    assert elapsed < 3.0, elapsed  # sending the whole body takes 4 s
    from conli.errors import ReplyTooLargeError

    assert isinstance(error, ReplyTooLargeError)
    return error


@pytest.mark.parametrize("provider", PROVIDERS)
def test_declared_content_length_over_cap_is_refused_before_reading(
        provider, raw_server, monkeypatch):
    server = raw_server(_head({"Content-Length": str(TOTAL)}), _filler(TOTAL), pace=PACE)
    backend = _backend(provider, server.url, monkeypatch)
    error = _assert_refused_early(provider, server, backend)
    assert server.sent < CAP  # refused on the header, before counting its way to the cap
    assert str(TOTAL) in str(error)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unsized_chunked_reply_is_cut_off_once_past_the_cap(provider, raw_server, monkeypatch):
    server = raw_server(_head({"Transfer-Encoding": "chunked"}),
                        _chunked(_filler(TOTAL), end=False), pace=PACE)
    backend = _backend(provider, server.url, monkeypatch)
    _assert_refused_early(provider, server, backend)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_chunked_reply_just_under_the_cap_still_works(provider, raw_server, monkeypatch):
    body = json.dumps(_answer(provider, "ok")).encode()
    body = body[:-1] + b" " * (CAP - len(body)) + b"}"  # whitespace pads it to exactly CAP
    assert len(body) == CAP
    pieces = (body[i:i + PIECE] for i in range(0, len(body), PIECE))
    server = raw_server(_head({"Transfer-Encoding": "chunked"}), _chunked(pieces))
    backend = _backend(provider, server.url, monkeypatch)
    try:
        assert _call(backend) == "ok"
    finally:
        backend.close()
    assert server.done.wait(10) and server.outcome == "finished"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_compressed_reply_is_refused_since_its_size_cannot_be_capped(
        provider, raw_server, monkeypatch):
    # a gzip body is tiny on the wire but may inflate without bound (a "zip bomb")
    body = gzip.compress(json.dumps(_answer(provider, "ok")).encode())
    server = raw_server(_head({"Content-Encoding": "gzip", "Content-Length": str(len(body))}),
                        iter([body]))
    backend = _backend(provider, server.url, monkeypatch)
    try:
        with pytest.raises(BackendError) as caught:
            _call(backend)
    finally:
        backend.close()
    assert not isinstance(caught.value, TransientBackendError)
    assert provider in str(caught.value) and "gzip" in str(caught.value)
    assert b"accept-encoding: identity" in server.request_head.lower()


@pytest.mark.integration
@pytest.mark.parametrize("provider", PROVIDERS)
def test_normal_reply_still_works_and_asks_for_an_uncompressed_body(provider, monkeypatch):
    def handler(request: Request) -> Reply:
        return Reply(200, _answer(provider, "fine"))

    with serve(handler) as server:
        backend = _backend(provider, server.url, monkeypatch)
        try:
            assert _call(backend) == "fine"
            assert _call(backend) == "fine"  # the pooled connection is reused cleanly
        finally:
            backend.close()
    assert len(server.requests) == 2
    assert all(r.headers.get("accept-encoding") == "identity" for r in server.requests)


def test_sdk_wrapped_cap_error_is_mapped_back_to_it():
    """SDKs that wrap any transport failure in APIConnectionError still yield our error."""
    import anthropic
    import openai

    from conli.backends.anthropic_backend import _map_error
    from conli.backends.openai_backend import map_openai_error
    from conli.errors import ReplyTooLargeError

    with openai.DefaultHttpxClient() as http:
        request = http.build_request("POST", "http://127.0.0.1/v1/x")
    for sdk, mapped in ((openai, lambda e: map_openai_error(e, "vllm", 5.0)),
                        (anthropic, lambda e: _map_error(e, 5.0))):
        cause = ReplyTooLargeError("vllm sent a reply over the 4 MiB cap")
        wrapped = sdk.APIConnectionError(request=request)
        wrapped.__cause__ = cause
        error = mapped(wrapped)
        assert isinstance(error, ReplyTooLargeError) and str(error) == str(cause)
    # an ordinary connection failure stays transient
    plain = openai.APIConnectionError(request=request)
    plain.__cause__ = ConnectionResetError("reset")
    assert isinstance(map_openai_error(plain, "vllm", 5.0), TransientBackendError)


def test_a_transport_error_names_the_server_by_its_name_and_url_given_apart():
    """The backend's name and its server's URL reach the message apart, never parsed back."""
    import openai

    from conli.backends.http_errors import transport_error
    from conli.backends.openai_backend import map_openai_error

    with openai.DefaultHttpxClient() as http:
        request = http.build_request("POST", "http://127.0.0.1:9/v1/chat/completions")
    refused = openai.APIConnectionError(request=request)
    # the request's URL says more than the base URL
    assert str(transport_error(openai, "vllm", refused, 5.0, url="http://127.0.0.1:9/v1")
               ).startswith("could not reach vllm at http://127.0.0.1:9/v1/chat/completions:")
    late = openai.APITimeoutError(request=request)
    assert str(map_openai_error(late, "llamacpp", 0.5, url="http://box:8080/v1")) == \
        "llamacpp at http://box:8080/v1 did not answer within 0.5s"
    assert str(map_openai_error(late, "openai", 0.5)) == "openai did not answer within 0.5s"
    no_request = openai.APIConnectionError(request=request)
    no_request.request = None  # type: ignore[assignment]
    assert str(transport_error(openai, "vllm", no_request, 5.0, url="http://h:1/v1")
               ).startswith("could not reach vllm at http://h:1/v1:")
