"""Embedded backend: llama.cpp in-process through ``xllamacpp``, no key and no network.

One llama.cpp server runs inside this process. Its prompt cache keeps the KV state of the
last prompt (and more in RAM), so calls that share the static prefix and source only
prefill their hypothesis. xllamacpp is imported only here.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from conli.backends.base import CallUsage, Completion, Message
from conli.backends.model_store import ensure_model
from conli.config import Settings
from conli.errors import (
    BackendError,
    BackendUnavailableError,
    BadRequestError,
    ConliError,
    ContextOverflowError,
)


class LocalBackend:
    """Qwen2.5-Coder-1.5B (or any GGUF) on the CPU via llama.cpp."""

    name = "local"
    hypotheses_per_call = 1  # small models judge only the first item of a batch
    max_concurrency = 1  # one slot: parallel calls would only fight for two cores
    scores_labels = True  # llama.cpp continues a trailing assistant message

    def __init__(self, settings: Settings) -> None:
        try:
            import xllamacpp
        except ImportError as exc:
            raise BackendUnavailableError(
                "the embedded backend needs llama.cpp bindings: pip install 'conli[local]'"
            ) from exc
        path = settings.local_model or ensure_model(settings.cache_dir / "models")
        if not Path(path).is_file():
            raise BackendUnavailableError(f"model file not found: {path}")
        self.model = Path(path).name
        self.context_window: int | None = settings.local_context
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = settings.local_context
        params.n_parallel = 1
        params.cpuparams.n_threads = settings.local_threads
        params.cpuparams_batch.n_threads = settings.local_threads
        params.verbosity = -1
        params.warmup = False
        self._server: Any = xllamacpp.Server(params)
        self._lock = threading.Lock()
        self._prompt_cache = settings.local_prompt_cache

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int,
        json_schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        top_logprobs: int = 0,
    ) -> Completion:
        """Run one chat completion; map llama.cpp's error objects onto our error tree."""
        request: dict[str, Any] = {
            "messages": list(messages),
            "max_tokens": max_tokens,
            "temperature": temperature,
            "seed": 0,
            "cache_prompt": self._prompt_cache,
        }
        if top_logprobs:
            request.update(logprobs=True, top_logprobs=top_logprobs)
        if json_schema is not None:
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": json_schema, "strict": True},
            }
        started = time.perf_counter()
        try:
            with self._lock:
                reply = self._server.handle_chat_completions(request)
        except ValueError as exc:
            raise BadRequestError(f"llama.cpp rejected the request: {exc}") from exc
        seconds = time.perf_counter() - started
        if "error" in reply:
            raise _map_error(reply["error"])
        return _to_completion(reply, seconds)

    def close(self) -> None:
        """Stop the in-process server and free the model."""
        self._server = None


def _map_error(error: dict[str, Any]) -> ConliError:
    """Context overflow is the user's input problem; anything else is a failed call."""
    message = str(error.get("message", error))
    if error.get("type") == "exceed_context_size_error":
        return ContextOverflowError(
            f"the prompt needs {error.get('n_prompt_tokens')} tokens but the model context "
            f"holds {error.get('n_ctx')}; shorten the source or raise CONLI_LOCAL_CONTEXT"
        )
    if error.get("code") == 400:
        return BadRequestError(f"llama.cpp rejected the request: {message}")
    return BackendError(f"llama.cpp failed: {message}")


def _to_completion(reply: dict[str, Any], seconds: float) -> Completion:
    choice = reply["choices"][0]
    usage = reply.get("usage", {})
    tokens = (choice.get("logprobs") or {}).get("content") or []
    return Completion(
        text=choice["message"].get("content") or "",
        finish_reason=choice.get("finish_reason"),
        top_logprobs=tuple(
            {alt["token"]: float(alt["logprob"]) for alt in token.get("top_logprobs", [])}
            for token in tokens
        ),
        tokens=tuple(str(token.get("token", "")) for token in tokens),
        usage=CallUsage(
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            cached_tokens=int(usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=seconds,
        ),
    )
