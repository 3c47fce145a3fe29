"""A content-addressed disk cache in front of any backend, so a re-run costs nothing.

The key is the SHA-256 of everything that decides the answer: backend name, model, and the
``CompletionRequest`` (messages, ``max_tokens``, ``json_schema``, ``temperature``, ``top_logprobs``,
``seed``, ``chat_template_kwargs``). The rendered messages carry the prompt template's
text, so a changed template is a different key.
Entries are written to a temp file and renamed into place (``os.replace``), so concurrent
writers never leave a torn file. Errors are never cached: an exception from the inner
backend propagates and nothing is written. A hit reports the original token counts, with
every prompt token as ``cached_tokens`` and zero seconds.

With ``temperature > 0`` a hit replays the sample stored for that seed: pass another
seed (or delete the directory) to draw new samples.

Forward-pass readings (the signal detectors') are kept too (``kept_reading``, one ``.npz``
per reading, keyed by the caller), so a cached run decides with the same detectors as an
uncached one: the inner backend's reading methods are passed through, never hidden.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from conli.backends.base import (
    Backend,
    CallUsage,
    Completion,
    CompletionRequest,
    Message,
    ReadsHiddenStates,
    ScoredTokens,
    TokenLogprob,
    TokenReading,
    counts_tokens,
    primes_prefix,
    reads_hidden_states,
    scores_continuations,
)
from conli.errors import BackendError
from conli.files import atomic_path, atomic_writer

CACHE_FORMAT = "1"


def cache_key(backend: str, model: str, request: CompletionRequest) -> str:
    """SHA-256 hex digest of a canonical JSON encoding of the call.

    The payload's shape is the stored caches' names: change it and every entry misses.
    """
    payload = {
        "format": CACHE_FORMAT,
        "backend": backend,
        "model": model,
        "messages": [{"role": m["role"], "content": m["content"]} for m in request.messages],
        "max_tokens": request.max_tokens,
        "json_schema": request.json_schema,
        "temperature": request.temperature,
        **({"top_logprobs": request.top_logprobs} if request.top_logprobs else {}),
        **({"seed": request.seed} if request.seed is not None else {}),
        **({"chat_template_kwargs": request.chat_template_kwargs}
           if request.chat_template_kwargs else {}),
    }
    encoded = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


class CachedBackend:
    """Wrap ``inner``, answering repeated calls from ``cache_dir``; the ``Backend`` contract."""

    def __init__(self, inner: Backend, cache_dir: Path) -> None:
        self.inner = inner
        self.cache_dir = Path(cache_dir)
        self.name = inner.name
        self.model = inner.model
        # calls and readings are answered here; priming (the static prefix) goes to ``inner``
        self.capabilities = replace(inner.capabilities, keeps_readings=True)
        self.hits = 0
        self.misses = 0
        self.replayed_seconds = 0.0  # what the hits took when first made (to cost a method)

    @property
    def endpoint(self) -> str | None:
        """The server the inner backend calls, if it calls one (``graph.identity``)."""
        endpoint = getattr(self.inner, "endpoint", None)
        return None if endpoint is None else str(endpoint)

    def count_tokens(self, text: str) -> int:
        """The inner backend's count, so windows are sized as they are without the cache."""
        counter = counts_tokens(self.inner)
        if counter is None:
            raise BackendError(f"{self.inner.name} cannot count tokens")
        return counter.count_tokens(text)

    def prime(self, messages: list[Message]) -> float:
        """Prime the inner backend, so the calls the cache misses start from the prefix."""
        primer = primes_prefix(self.inner)
        return primer.prime(messages) if primer is not None else 0.0

    def _reader(self) -> ReadsHiddenStates:
        reader = reads_hidden_states(self.inner)
        if reader is None:
            raise BackendError(f"{self.inner.name} does not read hidden states")
        return reader

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """The inner backend's token ids."""
        return self._reader().tokenize(text, special=special)

    def token_spans(self, text: str) -> list[tuple[int, int, int]]:
        """The inner backend's tokens with character offsets."""
        return self._reader().token_spans(text)

    def apply_template(self, messages: list[Message], *, generation_prompt: bool) -> str:
        """The inner backend's chat template."""
        return self._reader().apply_template(messages, generation_prompt=generation_prompt)

    def read_tokens(self, ids: list[int], score_from: int) -> TokenReading:
        """The inner backend's forward pass (readings are kept whole, not pass by pass)."""
        return self._reader().read_tokens(ids, score_from)

    def score_continuation(self, messages: list[Message], ids: list[int], *,
                           aside: bool = False) -> ScoredTokens:
        """The inner backend's scores (readings are kept whole, not pass by pass)."""
        scorer = scores_continuations(self.inner)
        if scorer is None:
            raise BackendError(f"{self.inner.name} does not score continuations")
        return scorer.score_continuation(messages, ids, aside=aside)

    def kept_reading(self, key: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The reading kept under ``key``, or ``compute()``'s, written whole and returned."""
        import numpy as np

        path = self.cache_dir / "readings" / key[:2] / f"{key}.npz"
        try:
            with np.load(path, allow_pickle=False) as stored:
                found = {name: stored[name] for name in stored.files}
            self.hits += 1
            return found
        except (OSError, ValueError, KeyError):
            pass
        arrays = compute()
        self.misses += 1
        with atomic_path(path) as partial, partial.open("wb") as handle:
            np.savez(handle, **arrays)
        return arrays

    def path_for(self, key: str) -> Path:
        """Where the entry for ``key`` lives (two-level fan-out)."""
        return self.cache_dir / key[:2] / f"{key}.json"

    def complete(self, request: CompletionRequest) -> Completion:
        """Return the stored completion for this exact call, or ask ``inner`` and store it."""
        key = cache_key(self.name, self.model, request)
        path = self.path_for(key)
        cached = _read_entry(path)
        if cached is not None:
            self.hits += 1
            self.replayed_seconds += cached[1]
            return cached[0]
        completion = self.inner.complete(request)
        self.misses += 1
        _write_entry(path, key, completion)
        return completion

    def close(self) -> None:
        """Release the inner backend."""
        self.inner.close()


def _read_entry(path: Path) -> tuple[Completion, float] | None:
    """The stored completion and the seconds it first took; None if absent or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        usage = data["usage"]
        return Completion(
            text=str(data["text"]),
            finish_reason=data.get("finish_reason"),
            usage=CallUsage(
                prompt_tokens=int(usage["prompt_tokens"]),
                cached_tokens=int(usage["prompt_tokens"]),
                completion_tokens=int(usage["completion_tokens"]),
                seconds=0.0,
                prefill_seconds=0.0,
                decode_seconds=0.0,
            ),
            logprobs=tuple(
                TokenLogprob(str(token), float(chosen), {str(k): float(v) for k, v in top.items()})
                for token, chosen, top in zip(
                    data.get("tokens", []),
                    data.get("logprobs") or [0.0] * len(data.get("tokens", [])),
                    data.get("top_logprobs", []),
                    strict=True,
                )
            ),
        ), float(usage.get("seconds") or 0.0)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_entry(path: Path, key: str, completion: Completion) -> None:
    """Write atomically, so a concurrent reader sees the whole entry or none."""
    entry = {
        "key": key,
        "text": completion.text,
        "finish_reason": completion.finish_reason,
        "usage": {
            "prompt_tokens": completion.usage.prompt_tokens,
            "completion_tokens": completion.usage.completion_tokens,
            "seconds": completion.usage.seconds,
        },
        "tokens": [t.token for t in completion.logprobs],
        "logprobs": [t.logprob for t in completion.logprobs],
        "top_logprobs": [t.top for t in completion.logprobs],
    }
    with atomic_writer(path) as handle:
        json.dump(entry, handle, ensure_ascii=False)
