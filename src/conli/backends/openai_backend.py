"""OpenAI Chat Completions through the official ``openai`` SDK, imported only here.

The same class serves OpenAI, Azure OpenAI (``azure_backend``) and OpenAI-compatible
servers such as vLLM and llama.cpp (``openai_compat``): only the client differs. The SDK's
own retries are off (``max_retries=0``) so every retry happens in ``conli.backends.retry``, and its
HTTP client refuses a reply over ``http_limits.MAX_REPLY_BYTES``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Literal

from conli.backends.base import (
    CallUsage,
    Capabilities,
    Completion,
    CompletionRequest,
    TokenLogprob,
    llama_cpp_split,
)
from conli.backends.endpoints import endpoint_of
from conli.backends.http_errors import error_for_status, server_label, transport_error
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

TokenParam = Literal["max_tokens", "max_completion_tokens"]
MAX_TOP_LOGPROBS = 20  # the Chat Completions API's limit on top_logprobs
# vLLM continues a trailing assistant message only when asked, and refuses the request if
# add_generation_prompt (its default: True) is left on with it; llama-server continues one
# by default (unless started with --no-prefill-assistant) and ignores both keys, but its
# reply repeats the prefix before the continuation (measured: xllamacpp 2026.10), which
# ``continuation`` drops so both servers give the continuation alone.
CONTINUE_FINAL_MESSAGE = {"continue_final_message": True, "add_generation_prompt": False}


def import_openai() -> Any:
    """Return the ``openai`` module, or fail naming the extra to install."""
    try:
        import openai
    except ImportError as exc:
        raise BackendUnavailableError(
            f"this backend needs the OpenAI SDK: {install_hint('openai')}"
        ) from exc
    return openai


class OpenAIChatBackend:
    """Any endpoint speaking OpenAI's ``/chat/completions``, behind our one contract."""

    def __init__(
        self,
        client: Any,
        *,
        name: str,
        model: str,
        settings: BackendSettings,
        token_param: TokenParam = "max_completion_tokens",
        context_window: int | None = None,
        continues_assistant: bool = False,
        url: str | None = None,
    ) -> None:
        """One endpoint; ``continues_assistant`` for servers that continue a last assistant message.

        They are asked to with ``CONTINUE_FINAL_MESSAGE`` (vLLM, llama-server; not OpenAI).
        ``url``: the server's base URL where the spec gave one; errors name the server by
        ``name`` and it (``vllm at http://host:8000/v1``), else by ``name`` alone.
        """
        self.name = name
        self.url = url
        self.where = server_label(name, url)
        self.model = model
        self.capabilities = Capabilities(
            context_window=context_window,
            max_concurrency=settings.max_concurrency,
            continues_assistant=continues_assistant,
            logprobs=MAX_TOP_LOGPROBS,
            takes_keys=True,
            streams=True,
        )
        self._client = client
        self._token_param: TokenParam = token_param
        self._timeout = settings.request_timeout
        self._limiter: CallLimiter = shared_limiter(settings)

    @property
    def endpoint(self) -> str:
        """The server this backend calls, as its client resolved it (``endpoint_of``)."""
        return endpoint_of(self._client.base_url, self._client.default_query)

    def complete(self, request: CompletionRequest) -> Completion:
        """One chat completion; JSON schema via ``response_format`` (non-strict).

        Strict mode would reject our schemas (``maxLength``, optional keys), so the schema
        guides the model and ``agents.structured`` validates the reply.
        """
        body, prefix = self._body(request)
        with self._limiter.slot(_estimate(request)) as reservation:
            started = time.perf_counter()
            reply = self._create(body)
            completion = to_completion(reply, time.perf_counter() - started, self.where)
            usage = completion.usage
            reservation.settle(usage.prompt_tokens + usage.completion_tokens)
        return continuation(completion, prefix)

    def stream(self, request: CompletionRequest) -> Iterator[str | Completion]:
        """The reply's text as the server writes it, then its ``Completion``; closing stops it.

        A continued answer, chat-template inputs or a JSON schema come whole (``complete``).
        """
        body, prefix = self._body(request)
        if prefix or request.chat_template_kwargs or request.json_schema is not None:
            completion = self.complete(request)
            yield completion.text
            yield completion
            return
        openai = import_openai()
        body.update(stream=True, stream_options={"include_usage": True})
        with self._limiter.slot(_estimate(request)) as reservation:
            started = time.perf_counter()
            chunks = self._create(body)
            texts: list[str] = []
            finish, usage = None, None
            try:
                for chunk in chunks:
                    usage = getattr(chunk, "usage", None) or usage
                    for choice in chunk.choices or []:
                        finish = choice.finish_reason or finish
                        if choice.delta is not None and choice.delta.content:
                            texts.append(choice.delta.content)
                            yield choice.delta.content
            except openai.OpenAIError as exc:
                raise map_openai_error(exc, self.name, self._timeout, url=self.url) from exc
            except Exception as exc:  # the connection broke mid-stream
                raise TransientBackendError(f"{self.where}'s stream broke: {exc}") from exc
            finally:
                chunks.close()
            spent = call_usage(usage, time.perf_counter() - started)
            reservation.settle(spent.prompt_tokens + spent.completion_tokens)
        yield Completion(text="".join(texts), usage=spent, finish_reason=finish)

    def _create(self, body: dict[str, Any]) -> Any:
        """The SDK's call, its failure mapped onto conli's error tree."""
        openai = import_openai()
        try:
            return self._client.chat.completions.create(**body)
        except openai.OpenAIError as exc:
            raise map_openai_error(exc, self.name, self._timeout, url=self.url) from exc
        except ValueError as exc:  # a 200 whose body is not JSON
            raise TransientBackendError(f"{self.where} sent an unreadable reply: {exc}") from exc

    def _body(self, request: CompletionRequest) -> tuple[dict[str, Any], str]:
        """The request's body for the SDK, and the prefix a continuing server may echo."""
        messages = request.messages
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "temperature": request.temperature,
            self._token_param: request.max_tokens,
            "timeout": self._timeout,
        }
        if request.top_logprobs:
            body.update(logprobs=True, top_logprobs=min(request.top_logprobs, MAX_TOP_LOGPROBS))
        if request.seed is not None:
            body["seed"] = request.seed
        prefix = ""
        if request.chat_template_kwargs:  # the template judges the last message, as it is
            if not self.capabilities.continues_assistant:
                raise ConfigError(f"{self.name} applies no served model's chat template: "
                                  "chat-template inputs need a vllm: or llamacpp: server")
            body["extra_body"] = {"chat_template_kwargs": request.chat_template_kwargs}
        elif self.capabilities.continues_assistant and messages[-1]["role"] == "assistant":
            body["extra_body"] = dict(CONTINUE_FINAL_MESSAGE)
            prefix = messages[-1]["content"]
        if request.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": request.json_schema, "strict": False},
            }
        return body, prefix

    def with_key(self, key: str) -> OpenAIChatBackend:
        """A copy sending ``key`` (a client's own, which the proxy forwards); it shares the pool."""
        keyed = copy.copy(self)
        keyed._client = self._client.with_options(api_key=key)
        return keyed

    def close(self) -> None:
        """Close the SDK's HTTP connection pool."""
        self._client.close()


def to_completion(reply: Any, seconds: float, provider: str) -> Completion:
    """Our ``Completion`` from a ``ChatCompletion``; a reply without choices is transient."""
    choices = getattr(reply, "choices", None)
    if not choices or getattr(choices[0], "message", None) is None:
        raise TransientBackendError(f"{provider} returned a reply without choices")
    choice = choices[0]
    return Completion(
        text=choice.message.content or "",
        finish_reason=choice.finish_reason,
        logprobs=_logprobs(getattr(choice, "logprobs", None)),
        usage=call_usage(getattr(reply, "usage", None), seconds,
                         getattr(reply, "timings", None)),  # llama-server's extra field
    )


def call_usage(usage: Any, seconds: float, timings: Any = None) -> CallUsage:
    """Our ``CallUsage`` from the API's ``usage`` (and llama-server's ``timings``, if sent)."""
    details = getattr(usage, "prompt_tokens_details", None)
    return CallUsage(
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        cached_tokens=int(getattr(details, "cached_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        seconds=seconds,
        **llama_cpp_split(timings),
    )


def _estimate(request: CompletionRequest) -> int:
    """The tokens a call may cost, reserved against the rate limits before it is made."""
    return call_cost([m["content"] for m in request.messages], request.max_tokens)


def continuation(completion: Completion, prefix: str) -> Completion:
    """The reply without the prefilled ``prefix`` when the server echoed it first."""
    if prefix and completion.text.startswith(prefix):
        return replace(completion, text=completion.text[len(prefix):])
    return completion


def _logprobs(logprobs: Any) -> tuple[TokenLogprob, ...]:
    """Chat Completions' ``choice.logprobs.content`` as ours (empty if not sent)."""
    content = getattr(logprobs, "content", None) or []
    return tuple(
        TokenLogprob(
            token=str(item.token),
            logprob=float(item.logprob),
            top={str(alt.token): float(alt.logprob) for alt in (item.top_logprobs or [])},
        )
        for item in content
    )


def map_openai_error(exc: Exception, provider: str, timeout: float, *,
                     url: str | None = None) -> BackendError:
    """Translate an ``openai`` exception into conli's error tree (the one place).

    ``provider`` is the backend's name, ``url`` its server's base URL where it has one.
    """
    openai = import_openai()
    unanswered = transport_error(openai, provider, exc, timeout, url=url)
    if unanswered is not None:
        return unanswered
    provider = server_label(provider, url)
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error", body)
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        return error_for_status(
            provider,
            exc.status_code,
            str(message or exc.message),
            dict(exc.response.headers),
            code if isinstance(code, str) else None,
        )
    return BackendError(f"{provider} call failed: {exc}")


def build_client(factory: Any, provider: str, **kwargs: Any) -> Any:
    """Construct an SDK client with retries off and replies capped; say what to set if it fails."""
    openai = import_openai()
    http_client = capped_http_client(openai.DefaultHttpxClient, provider)
    try:
        return factory(max_retries=0, http_client=http_client, **kwargs)
    except openai.OpenAIError as exc:
        http_client.close()
        raise AuthenticationError(f"{provider}: {exc}") from exc
    except ValueError as exc:
        http_client.close()
        raise ConfigError(f"{provider}: {exc}") from exc


def openai_backend(model: str, settings: BackendSettings,
                   api_key: str | None = None) -> OpenAIChatBackend:
    """``openai:<model>``: api.openai.com (or ``OPENAI_BASE_URL``), key from ``OPENAI_API_KEY``.

    ``api_key``: this endpoint's own key (a detector's server), in place of the variable.
    """
    if not model.strip():
        raise ConfigError("the openai backend needs a model: openai:gpt-4o-mini")
    openai = import_openai()
    key = {"api_key": api_key} if api_key else {}
    client = build_client(openai.OpenAI, "openai", timeout=settings.request_timeout, **key)
    return OpenAIChatBackend(client, name="openai", model=model.strip(), settings=settings)
