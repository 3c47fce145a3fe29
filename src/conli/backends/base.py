"""The one contract every model backend implements.

A backend turns chat messages into one completion and reports what it cost. It does not
retry, parse, or know about NLI: those live in ``retry.py`` and ``agents/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable


class Message(TypedDict):
    """One chat message, in the shape every provider SDK accepts."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class CallUsage:
    """What one model call cost: tokens as the provider counted them, and wall time.

    ``prefill_seconds`` and ``decode_seconds`` split the model's own time where the server
    reports it (llama.cpp's ``timings``); None elsewhere.
    """

    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    prefill_seconds: float | None = None
    decode_seconds: float | None = None


def llama_cpp_split(timings: Any) -> dict[str, float | None]:
    """``CallUsage``'s prefill/decode seconds from llama.cpp's ``timings`` (milliseconds).

    The embedded server and llama-server behind the OpenAI-compatible path both send it;
    anything else (absent, not a number) gives None.
    """
    def seconds(key: str) -> float | None:
        value = timings.get(key) if isinstance(timings, dict) else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value) / 1000

    return {"prefill_seconds": seconds("prompt_ms"), "decode_seconds": seconds("predicted_ms")}


@dataclass(frozen=True)
class Completion:
    """A model's reply: its text, why it stopped, and its usage."""

    text: str
    usage: CallUsage
    finish_reason: str | None = None
    top_logprobs: tuple[dict[str, float], ...] = ()  # per generated token: token -> logprob
    tokens: tuple[str, ...] = ()  # the generated tokens, aligned with ``top_logprobs``


@runtime_checkable
class Backend(Protocol):
    """A chat model we can ask for one completion at a time.

    ``hypotheses_per_call`` is how many numbered hypotheses one NLI call may carry:
    small local models judge only the first item of a batch, hosted ones handle many.
    ``max_concurrency`` bounds how many calls the pipeline runs at once.
    ``scores_labels`` says the backend continues a trailing assistant message and returns
    top log-probabilities, which the one-token NLI scoring mode needs.
    """

    name: str
    model: str
    hypotheses_per_call: int
    max_concurrency: int
    context_window: int | None
    scores_labels: bool

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int,
        json_schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        top_logprobs: int = 0,
    ) -> Completion:
        """Return one completion; raise a ``BackendError`` subclass on failure.

        With ``json_schema`` the backend constrains or requests JSON matching it where
        the provider supports that; callers still validate the text. ``top_logprobs > 0``
        asks for that many alternatives per generated token, where supported.
        """
        ...

    def close(self) -> None:
        """Release processes, sockets or model memory held by the backend."""
        ...


@runtime_checkable
class PrimesPrefix(Protocol):
    """A backend that can keep a prompt prefix's model state across processes.

    Optional beside ``Backend``: only backends with a local prompt cache implement it.
    """

    def prime(self, messages: list[Message]) -> float:
        """Make ``messages``' state current (restore or prefill and save); return seconds."""
        ...


@runtime_checkable
class CountsTokens(Protocol):
    """A backend that can count tokens exactly (to size source windows); optional."""

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes in this backend's model."""
        ...
