"""A scripted backend for tests: replies come from a queue or a function, never a model.

It sits behind the same contract as real backends, so tests drive every node and the
whole graph without a model, and can script failures (exceptions) at any call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from conli.backends.base import CallUsage, Capabilities, Completion, Message, Request

Reply = str | Completion | BaseException
Responder = Callable[[list[Message]], Reply]


class ScriptedBackend:
    """Answers each call with the next scripted reply, or with ``responder(messages)``.

    A reply that is an exception is raised instead of returned. Every call's messages
    are kept in ``calls`` so tests can assert what was asked.
    """

    name = "fake"
    model = "scripted"

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        responder: Responder | None = None,
        capabilities: Capabilities | None = None,
        **declared: Any,
    ) -> None:
        """``declared`` sets single ``Capabilities`` fields, e.g. ``judges_batches=True``."""
        self._replies = list(replies)
        self._responder = responder
        base = capabilities or Capabilities(judges_batches=False)
        self.capabilities = replace(base, **declared)
        self.calls: list[list[Message]] = []
        self.schemas: list[dict[str, Any] | None] = []

    def complete(self, request: Request) -> Completion:
        """Return (or raise) the next scripted reply."""
        messages = request.messages
        self.calls.append(list(messages))
        self.schemas.append(request.json_schema)
        if self._replies:
            reply = self._replies.pop(0)
        elif self._responder is not None:
            reply = self._responder(list(messages))
        else:
            raise AssertionError(f"unscripted call #{len(self.calls)}")
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, Completion):
            return reply
        usage = CallUsage(
            prompt_tokens=sum(len(m["content"]) // 4 for m in messages),
            completion_tokens=len(reply) // 4,
        )
        return Completion(text=reply, usage=usage, finish_reason="stop")

    def close(self) -> None:
        """Nothing to release."""
