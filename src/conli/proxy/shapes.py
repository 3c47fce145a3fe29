"""conli's answers in OpenAI's chat completions wire format: a completion, chunks, errors.

The ``conli`` field rides on the completion (on the last chunk, streamed) beside the fields
OpenAI defines, so a client that ignores it still works; OpenAI's SDK keeps it
(``completion.conli``). Errors use OpenAI's shape (``{"error": {...}}``), which its SDKs
raise as their own exceptions; an upstream's failure keeps its meaning (401, 429, 400).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from conli.backends.base import CallUsage
from conli.errors import AuthenticationError, BadRequestError, ConliError, RateLimitError, boundary
from conli.proxy.verdicts import Verdicts
from conli.service.problems import ProblemError, openai_error_body
from conli.service.stream import retry_seconds

Stage = Literal["request", "upstream", "check"]
DONE = b"data: [DONE]\n\n"


@dataclass(frozen=True)
class Answer:
    """What every part of one answer shares: its id, time and the model that wrote it."""

    model: str
    ident: str = field(default_factory=lambda: f"chatcmpl-conli-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))

    def completion(self, text: str, finish_reason: str, usage: CallUsage,
                   verdicts: Verdicts) -> dict[str, Any]:
        """A ``chat.completion`` object carrying ``conli``."""
        return {"id": self.ident, "object": "chat.completion", "created": self.created,
                "model": self.model, "choices": [{
                    "index": 0, "message": {"role": "assistant", "content": text},
                    "finish_reason": finish_reason, "logprobs": None}],
                "usage": token_usage(usage), "conli": _field(verdicts)}

    def chunk(self, delta: dict[str, str] | None = None, *, finish_reason: str | None = None,
              usage: CallUsage | None = None, verdicts: Verdicts | None = None) -> dict[str, Any]:
        """A ``chat.completion.chunk``: a delta, or (``delta`` None) the last, with ``conli``."""
        choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None,
                                             "finish_reason": finish_reason}]
        chunk: dict[str, Any] = {"id": self.ident, "object": "chat.completion.chunk",
                                 "created": self.created, "model": self.model,
                                 "choices": choices}
        if usage is not None:
            chunk["usage"] = token_usage(usage)
        if verdicts is not None:
            chunk["conli"] = _field(verdicts)
        return chunk


def _field(verdicts: Verdicts) -> dict[str, Any]:
    return verdicts.model_dump(mode="json")


def token_usage(usage: CallUsage) -> dict[str, int]:
    """The upstream's tokens as the API counts them (the check's are in ``conli.result``)."""
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens}


def sse(data: dict[str, Any]) -> bytes:
    """One server-sent event, as the SDKs read a stream."""
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


@dataclass(frozen=True)
class ErrorAnswer:
    """An error in OpenAI's shape: its status, body and headers."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str]


def error_answer(exc: BaseException, stage: Stage, *, client_key: bool = False,
                 retry_after: int = 5) -> ErrorAnswer:
    """The answer for a failure at ``stage``: the request, the upstream, or the check.

    The upstream's rejection of the operator's own key is a 502 (the client's key is
    fine), of a client's forwarded key a 401. A check that cannot run answers its status
    from the one table (``errors.boundary``) with the type ``conli_check_failed``; the
    service's own refusals (``ProblemError``: no free slot, past the time limit) keep theirs.
    """
    if isinstance(exc, ProblemError):
        return ErrorAnswer(exc.status, openai_error_body(
            f"{exc.title}: {exc.detail}" if exc.detail else exc.title, kind=_kind(exc.status),
            code=exc.slug), exc.headers)
    answer = boundary(exc)
    message = str(exc) if isinstance(exc, ConliError) else answer.title
    status, kind = answer.http_status, _kind(answer.http_status)
    if stage == "upstream":
        kind = "upstream_error"
        if isinstance(exc, AuthenticationError):
            status, kind = (401, "authentication_error") if client_key else (502, kind)
            if not client_key:
                message = "the upstream refused the proxy's own credentials (the operator's key)"
        elif isinstance(exc, RateLimitError):
            status, kind = 429, "rate_limit_error"
        elif isinstance(exc, BadRequestError):
            status, kind = 400, "invalid_request_error"
        message = f"upstream: {message}"
    elif stage == "check":
        kind, message = "conli_check_failed", f"the reply could not be checked: {message}"
    headers = {"Retry-After": str(retry_seconds(exc, retry_after))} if status in (
        429, 503) else {}
    return ErrorAnswer(status, openai_error_body(message, kind=kind, code=answer.slug,
                                                 param=getattr(exc, "param", None)), headers)


def _kind(status: int) -> str:
    return {401: "authentication_error", 429: "rate_limit_error"}.get(
        status, "invalid_request_error" if status < 500 else "server_error")
