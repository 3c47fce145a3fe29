"""The proxy under test: the app on uvicorn, a loopback OpenAI-compatible upstream before it.

The upstream is a ``FakeServer`` speaking Chat Completions (``vllm:`` spec, so the proxy
reaches it over real HTTP through the openai backend); the checker is the scripted backend
(``tests.support.scripted``: a claim holding ``FALSE`` is contradicted, the editor makes it true).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from conli.backends.base import Backend
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.errors import BackendUnavailableError
from conli.proxy.app import proxy_mount
from tests.support import scripted
from tests.support.http_fakes import FakeServer, Reply, Request, openai_chat, serve
from tests.support.service import KEY, serving

SOURCE = "The Riverside library opened in 1962. The city council runs it."
QUESTION = "When did the library open, and who runs it?"
REPLY = "The library opened in 1962. The library is FALSE run by a charity."
REWRITTEN = "The library opened in 1962. The library is true run by a charity."
MESSAGES = [{"role": "user", "content": QUESTION}]
CONLI = {"conli": {"sources": [SOURCE]}}


def chat_handler(reply: str = REPLY, *, status: int = 200, body: Any = None,
                 headers: dict[str, str] | None = None,
                 delay: float = 0.0) -> Callable[[Request], Reply]:
    """An upstream answering every chat with ``reply`` (or ``status`` with ``body``).

    A request with ``"stream": true`` gets the reply as server-sent events, a word a chunk.
    Each chat is answered after ``delay`` seconds (a hosted model's time, for benchmarks).
    """

    def handle(request: Request) -> Reply:
        if request.path.endswith("/models"):
            return Reply(body={"object": "list", "data": [
                {"id": "gpt-test", "object": "model", "created": 0, "owned_by": "fake"}]})
        if status != 200:
            return Reply(status=status, body=body, headers=headers or {})
        if isinstance(request.body, dict) and request.body.get("stream"):
            return Reply(body=sse_reply(reply), headers={"content-type": "text/event-stream"},
                         delay=delay)
        return Reply(body=openai_chat(reply, prompt=30, completion=12), delay=delay)

    return handle


def sse_reply(reply: str) -> bytes:
    """``reply`` as one body of server-sent events (``sse_events``)."""
    return b"".join(sse_events(reply))


def sse_events(reply: str, *, finish: str = "stop") -> list[bytes]:
    """``reply`` as Chat Completions chunks (a word each), the finish, a usage chunk, [DONE]."""
    words = reply.split(" ")
    pieces = [word if i == 0 else f" {word}" for i, word in enumerate(words)]
    base = {"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-test"}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                    "finish_reason": None}]}]
    chunks += [{**base, "choices": [{"index": 0, "delta": {"content": piece},
                                     "finish_reason": None}]} for piece in pieces]
    chunks += [{**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
               {**base, "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 12,
                                                 "total_tokens": 42}}]
    return [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


@dataclass
class Proxied:
    """A running proxy: its base URL (``.../v1``) and the upstream that saw its calls."""

    base_url: str
    upstream: FakeServer

    def chats(self) -> list[Request]:
        """The chat completions the upstream received."""
        return [r for r in self.upstream.requests if r.path.endswith("/chat/completions")]


@contextmanager
def proxied(handler: Callable[[Request], Reply] | None = None, *,
            checker: Backend | None = None, **settings: Any) -> Iterator[Proxied]:
    """The service with the proxy mounted before a loopback upstream (``settings``: Settings')."""
    with serve(handler or chat_handler()) as upstream:
        chosen = Settings(service_api_keys=[KEY],  # type: ignore[call-arg]
                          proxy_upstream=f"vllm:{upstream.url}/v1#gpt-test", **settings)
        with serving(chosen, backend=checker or scripted.backend(concurrency=2),
                     mount=proxy_mount(chosen)) as base:
            yield Proxied(f"{base}/v1", upstream)


def _dead(after: int = 0) -> ScriptedBackend:
    """A checker whose backend fails from its ``after``-th call on."""
    answer = scripted.responder()
    calls = []

    def respond(messages: list) -> object:  # type: ignore[type-arg]
        calls.append(1)
        return BackendUnavailableError("the checker's server is down") if len(calls) > after \
            else answer(messages)

    return ScriptedBackend(responder=respond, judges_batches=True, max_concurrency=2)  # type: ignore[arg-type]
