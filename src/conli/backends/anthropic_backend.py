"""Anthropic's Messages API through the official ``anthropic`` SDK, imported only here.

Structured output is a forced tool whose ``input_schema`` is the answer schema. The
static prompt and the source come first and carry ``cache_control``, so every call for
one response reads them from Anthropic's prompt cache. SDK retries are off, and its HTTP
client refuses a reply over ``http_limits.MAX_REPLY_BYTES``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from conli.backends.base import CallUsage, Capabilities, Completion, CompletionRequest, Message
from conli.backends.endpoints import endpoint_of
from conli.backends.http_errors import error_for_status, transport_error
from conli.backends.http_limits import capped_http_client
from conli.backends.limits import CallLimiter, call_cost, shared_limiter
from conli.config import BackendSettings
from conli.errors import (
    AuthenticationError,
    BackendError,
    BackendUnavailableError,
    ConfigError,
    TransientBackendError,
    install_hint,
)

TOOL_NAME = "answer"
_EPHEMERAL = {"type": "ephemeral"}
_STOP_REASONS = {"max_tokens": "length", "end_turn": "stop", "tool_use": "stop"}


def _import_anthropic() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise BackendUnavailableError(
            f"this backend needs the Anthropic SDK: {install_hint('anthropic')}"
        ) from exc
    return anthropic


class AnthropicBackend:
    """Claude models via ``/v1/messages``; key from ``ANTHROPIC_API_KEY``."""

    name = "anthropic"

    def __init__(self, model: str, settings: BackendSettings) -> None:
        if not model.strip():
            raise ConfigError("the anthropic backend needs a model: anthropic:<model>")
        anthropic = _import_anthropic()
        self.model = model.strip()
        self.capabilities = Capabilities(max_concurrency=settings.max_concurrency)
        self._timeout = settings.request_timeout
        self._limiter: CallLimiter = shared_limiter(settings)
        http_client = capped_http_client(anthropic.DefaultHttpxClient, self.name)
        try:
            self._client = anthropic.Anthropic(
                max_retries=0, timeout=settings.request_timeout, http_client=http_client
            )
        except anthropic.AnthropicError as exc:
            http_client.close()
            raise AuthenticationError(f"anthropic: {exc}; set ANTHROPIC_API_KEY") from exc

    @property
    def endpoint(self) -> str:
        """The server this backend calls (``ANTHROPIC_BASE_URL`` or Anthropic's own)."""
        return endpoint_of(self._client.base_url)

    def complete(self, request: CompletionRequest) -> Completion:
        """One Messages call; with a schema, the answer is the forced tool's input as JSON."""
        anthropic = _import_anthropic()
        system, turns = to_anthropic_messages(request.messages)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            # no temperature: the current Messages API (SDK 2.x) no longer takes sampling
            # parameters (nor a seed), so both are accepted for the contract and not sent.
            "messages": turns,
            "timeout": self._timeout,
        }
        if system:
            body["system"] = system
        if request.json_schema is not None:
            body["tools"] = [
                {
                    "name": TOOL_NAME,
                    "description": "Give the answer in exactly this structure.",
                    "input_schema": inline_refs(request.json_schema),
                }
            ]
            body["tool_choice"] = {"type": "tool", "name": TOOL_NAME}
        estimate = call_cost([m["content"] for m in request.messages], request.max_tokens)
        with self._limiter.slot(estimate) as reservation:
            started = time.perf_counter()
            try:
                reply = self._client.messages.create(**body)
            except anthropic.AnthropicError as exc:
                raise _map_error(exc, self._timeout) from exc
            except ValueError as exc:  # a 200 whose body is not JSON
                raise TransientBackendError(f"anthropic sent an unreadable reply: {exc}") from exc
            completion = _to_completion(reply, time.perf_counter() - started, request.json_schema)
            usage = completion.usage
            reservation.settle(usage.prompt_tokens + usage.completion_tokens)
        return completion

    def close(self) -> None:
        """Close the SDK's HTTP connection pool."""
        self._client.close()


def to_anthropic_messages(messages: list[Message]) -> tuple[list[dict[str, Any]], list[Any]]:
    """System blocks and turns, with cache breakpoints after the system prompt and source.

    The last user turn with a ``stable_prefix`` (set by the prompt renderer: rules and
    source, the same on every call of a check) is split there: the prefix is one cached
    block, the per-call rest another.
    """
    system: list[dict[str, Any]] = [
        {"type": "text", "text": m["content"]} for m in messages if m["role"] == "system"
    ]
    if system:
        system[-1]["cache_control"] = _EPHEMERAL
    turns: list[dict[str, Any]] = []
    cut_at: tuple[int, int] | None = None
    for m in messages:
        if m["role"] == "system":
            continue
        if m["role"] == "user" and m.get("stable_prefix"):
            cut_at = (len(turns), m["stable_prefix"])
        turns.append({"role": m["role"], "content": m["content"]})
    if cut_at is not None:
        index, cut = cut_at
        text = turns[index]["content"]
        blocks: list[dict[str, Any]] = [
            {"type": "text", "text": text[:cut], "cache_control": _EPHEMERAL}
        ]
        if text[cut:].strip():
            blocks.append({"type": "text", "text": text[cut:].strip()})
        turns[index]["content"] = blocks
    return system, turns


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` with each local ``$ref`` replaced by its ``$defs`` entry."""
    defs = schema.get("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                rest = {k: v for k, v in node.items() if k != "$ref"}
                merged = {**defs[ref.split("/")[-1]], **rest}
                return resolve(merged)
            return {k: resolve(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


def _to_completion(reply: Any, seconds: float, json_schema: dict[str, Any] | None) -> Completion:
    """Text (or the tool input as JSON) plus usage; cached tokens are cache reads."""
    blocks = getattr(reply, "content", None)
    if blocks is None:
        raise TransientBackendError("anthropic returned a reply without content")
    text = ""
    tool_input = next(
        (b.input for b in blocks if getattr(b, "type", None) == "tool_use" and b.name == TOOL_NAME),
        None,
    )
    if json_schema is not None and tool_input is not None:
        text = json.dumps(tool_input, ensure_ascii=False)
    else:
        text = "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", None) == "text")
    usage = getattr(reply, "usage", None)
    read = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
    written = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
    stop = getattr(reply, "stop_reason", None)
    return Completion(
        text=text,
        finish_reason=_STOP_REASONS.get(stop, stop) if stop else None,
        usage=CallUsage(
            # Anthropic's input_tokens excludes cache reads and writes; ours is the whole prompt.
            prompt_tokens=int(getattr(usage, "input_tokens", 0) or 0) + read + written,
            cached_tokens=read,
            completion_tokens=int(getattr(usage, "output_tokens", 0) or 0),
            seconds=seconds,
        ),
    )


def _map_error(exc: Exception, timeout: float) -> BackendError:
    """Translate an ``anthropic`` exception into conli's error tree (the one place)."""
    anthropic = _import_anthropic()
    unanswered = transport_error(anthropic, "anthropic", exc, timeout)
    if unanswered is not None:
        return unanswered
    if isinstance(exc, anthropic.APIStatusError):
        message = getattr(exc, "api_message", None) or exc.message
        return error_for_status(
            "anthropic", exc.status_code, str(message), dict(exc.response.headers)
        )
    return BackendError(f"anthropic call failed: {exc}")


def anthropic_backend(model: str, settings: BackendSettings) -> AnthropicBackend:
    """``anthropic:<model>``."""
    return AnthropicBackend(model, settings)
