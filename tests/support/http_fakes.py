"""Loopback HTTP servers that speak providers' wire formats, for the hosted-backend tests.

A ``FakeServer`` runs a scripted handler on 127.0.0.1 (random port) in a thread and
records every request, so tests assert exactly what reached the "provider".
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

_CLAIM = re.compile(r'<claim id="(\d+)">(.*?)</claim>', re.DOTALL)


@dataclass
class Request:
    """One request as the server saw it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    at: float
    chunks_sent: int = 0  # a chunked reply: chunks written before it ended (or the client left)
    client_left: bool = False  # a chunked reply's client closed the connection before its end


@dataclass
class Reply:
    """What to answer: status, JSON-able body (or raw bytes), headers, delay before it."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunks: list[bytes] | None = None  # sent chunked, ``every`` seconds apart (a stream)
    every: float = 0.0


Handler = Callable[[Request], Reply]


class FakeServer:
    """A threaded HTTP server on loopback answering with ``handler(request)``."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                url = urlparse(self.path)
                request = Request(self.command, url.path, parse_qs(url.query),
                                  {k.lower(): v for k, v in self.headers.items()}, body,
                                  time.monotonic())
                with outer._lock:
                    outer.requests.append(request)
                reply = outer.handler(request)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.chunks is not None:
                    self._stream(reply, request)
                    return
                payload = reply.body if isinstance(reply.body, bytes) else json.dumps(
                    reply.body if reply.body is not None else {}).encode()
                try:
                    self.send_response(reply.status)
                    headers = {"content-type": "application/json", **reply.headers}
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def _stream(self, reply: Reply, request: Request) -> None:
                """``reply.chunks`` as they would come from a model writing its answer."""
                self.send_response(reply.status)
                for key, value in {"content-type": "text/event-stream", **reply.headers}.items():
                    self.send_header(key, value)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    for chunk in [*reply.chunks, b""]:  # type: ignore[union-attr]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                        request.chunks_sent += 1
                        time.sleep(reply.every)
                except (BrokenPipeError, ConnectionResetError):
                    request.client_left = True

            do_GET = _serve
            do_POST = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:54321."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def serve(handler: Handler) -> Iterator[FakeServer]:
    """Run a ``FakeServer`` for the duration of a ``with`` block."""
    server = FakeServer(handler).start()
    try:
        yield server
    finally:
        server.stop()


# --- reading our prompts back ----------------------------------------------------------


def _text(content: Any) -> str:
    """Message content as text: a string, or a list of Anthropic/OpenAI text blocks."""
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


def claims(body: dict[str, Any]) -> list[str]:
    """The claims of the last user message that carries any, in id order."""
    for message in reversed(body["messages"]):
        found = _CLAIM.findall(_text(message["content"])) if message["role"] == "user" else []
        if found:
            return [text for _, text in sorted(found, key=lambda m: int(m[0]))]
    return []


def nli_answer(texts: list[str], label: Callable[[str], str], skip: Callable[[str], bool] = (
        lambda _t: False)) -> dict[str, Any]:
    """A chain-of-thought NLI answer for ``texts``, leaving out the ones ``skip`` picks."""
    return {"judgements": [
        {"id": i, "evidence": "quoted", "reasoning": "scripted", "label": label(t)}
        for i, t in enumerate(texts) if not skip(t)
    ]}


# --- wire formats ----------------------------------------------------------------------


def openai_chat(content: str, *, prompt: int = 100, cached: int = 0, completion: int = 20,
                finish: str = "stop") -> dict[str, Any]:
    """A Chat Completions response body (OpenAI and Azure OpenAI)."""
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": cached}},
    }


def openai_error(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """An OpenAI / Azure OpenAI error body."""
    return {"error": {"message": message, "type": "error", "param": None,
                      "code": code or str(status)}}


def anthropic_message(*, tool_input: dict[str, Any] | None = None, text: str = "",
                      input_tokens: int = 50, cache_read: int = 0, cache_write: int = 0,
                      output_tokens: int = 20) -> dict[str, Any]:
    """A Messages API response body: one forced tool call, or text."""
    if tool_input is not None:
        content = [{"type": "tool_use", "id": "toolu_01", "name": "answer", "input": tool_input}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": text}]
        stop = "end_turn"
    return {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
        "content": content, "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_read_input_tokens": cache_read,
                  "cache_creation_input_tokens": cache_write},
    }


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    """A Messages API error body, e.g. kind ``rate_limit_error``."""
    return {"type": "error", "error": {"type": kind, "message": message}}
