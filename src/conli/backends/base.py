"""The one contract every model backend implements.

A backend turns chat messages into one completion and reports what it cost. It does not
retry, parse, or know about NLI or our prompts' layout: those live in ``calls.py`` (the one
path callers take: deadline, retries, usage), ``agents/`` and ``prompts/``. What it can do
beyond that is declared once, in ``capabilities``; callers read that record, never the
backend's class. What a backend is asked is a ``CompletionRequest`` (a check's own request,
a front door's, is ``run.request.RunRequest``); ``Request``, its old name, still works with
a ``DeprecationWarning``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Protocol, TypedDict, cast, runtime_checkable

from conli.errors import BackendError
from conli.version import renamed


class Message(TypedDict):
    """One chat message, in the shape every provider SDK accepts.

    ``stable_prefix``: the first that many characters of ``content`` are the same in every
    call of one check (rules, source), so a provider with a prompt cache may cache them.
    The prompt renderer sets it; backends that cache by prefix read it.
    """

    role: Literal["system", "user", "assistant"]
    content: str
    stable_prefix: NotRequired[int]


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond one chat completion, declared in one record.

    - ``context_window``: tokens a prompt and its answer may hold (None: not known).
    - ``max_concurrency``: calls worth running at once.
    - ``judges_batches``: answers every item of a prompt holding several claims (small
      local models judge only the first, so they get one claim per call).
    - ``continues_assistant``: continues a trailing assistant message (a prefilled answer).
    - ``logprobs``: how many top alternatives per generated token it can return (0: none).
    - ``counts_tokens``, ``primes_prefix``, ``hidden_states``, ``scores_continuations``,
      ``keeps_readings``, ``takes_keys``, ``streams``: implements the optional
      ``CountsTokens``, ``PrimesPrefix``, ``ReadsHiddenStates``, ``ScoresContinuations``,
      ``KeepsReadings``, ``TakesKeys`` and ``StreamsText`` (use the functions of the same
      names below: ``streams_text`` for the last).
    """

    context_window: int | None = None
    max_concurrency: int = 1
    judges_batches: bool = True
    continues_assistant: bool = False
    logprobs: int = 0
    counts_tokens: bool = False
    primes_prefix: bool = False
    hidden_states: bool = False
    scores_continuations: bool = False
    keeps_readings: bool = False
    takes_keys: bool = False
    streams: bool = False

    @property
    def scores_labels(self) -> bool:
        """Can read P(label) from one prefilled token: continuation plus alternatives."""
        return self.continues_assistant and self.logprobs > 0


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
class TokenLogprob:
    """One generated token, its log-probability and the top alternatives at its place."""

    token: str
    logprob: float
    top: dict[str, float]


@dataclass(frozen=True)
class Completion:
    """A model's reply: its text, why it stopped, its usage, and its tokens' log-probs.

    ``logprobs`` is empty unless alternatives were asked for and the backend gives them.
    """

    text: str
    usage: CallUsage
    finish_reason: str | None = None
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class CompletionRequest:
    """One completion to ask a backend for: the chat, and how to answer it.

    - ``messages``: the chat so far; a trailing assistant message is the answer's start.
    - ``max_tokens``: the most tokens the answer may take.
    - ``json_schema``: constrain (or ask for) JSON like this; callers still validate it.
    - ``temperature``: sampling temperature, 0 for greedy.
    - ``top_logprobs``: alternatives per generated token, capped by ``capabilities.logprobs``.
    - ``seed``: the sample's seed where the provider takes one; the call cache keys on it.
    - ``chat_template_kwargs``: inputs of the served model's own chat template (vLLM's
      ``chat_template_kwargs``, e.g. Granite Guardian's ``guardian_config``); with them a
      trailing assistant message is the text the template judges, not an answer to go on
      from. Only the OpenAI-compatible servers (``vllm:``, ``llamacpp:``) take them; the
      OpenAI backend refuses them where it serves no such server, the others ignore them.
    """

    messages: list[Message]
    max_tokens: int
    json_schema: dict[str, Any] | None = None
    temperature: float = 0.0
    top_logprobs: int = 0
    seed: int | None = None
    chat_template_kwargs: dict[str, Any] | None = None


@runtime_checkable
class Backend(Protocol):
    """A chat model we can ask for one completion at a time; see ``Capabilities``."""

    name: str
    model: str
    capabilities: Capabilities

    def complete(self, request: CompletionRequest) -> Completion:
        """Return one completion for ``request``; raise a ``BackendError`` subclass on failure.

        What the provider cannot honour it ignores: log-probs where it has none, a seed
        where it takes none (llama.cpp in-process does not promise to repeat a sample).
        """
        ...

    def close(self) -> None:
        """Release processes, sockets or model memory held by the backend."""
        ...


class PrimesPrefix(Protocol):
    """A backend that can keep a prompt prefix's model state across processes.

    Optional beside ``Backend`` (``capabilities.primes_prefix``).
    """

    def prime(self, messages: list[Message]) -> float:
        """Make ``messages``' state current (restore or prefill and save); return seconds."""
        ...


class CountsTokens(Protocol):
    """A backend that can count tokens exactly (``capabilities.counts_tokens``)."""

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes in this backend's model."""
        ...


@dataclass(frozen=True)
class TokenReading:
    """One forward pass over token ids, nothing generated.

    ``states``: the final hidden state (after the output norm) at every position, shape
    (len(ids), dim). From ``score_from`` on, ``logp`` is each token's log-probability given
    the tokens before it and ``entropy`` that of the distribution it was drawn from.
    """

    states: Any
    logp: Any
    entropy: Any


class ReadsHiddenStates(Protocol):
    """A backend that reads token ids in a forward pass (``capabilities.hidden_states``)."""

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Token ids; ``special`` parses chat-template markers, else they are plain text."""
        ...

    def token_spans(self, text: str) -> list[tuple[int, int, int]]:
        """``text`` tokenized as plain text: (id, start, end) with character offsets."""
        ...

    def apply_template(self, messages: list[Message], *, generation_prompt: bool) -> str:
        """The model's own chat template applied to ``messages``."""
        ...

    def read_tokens(self, ids: list[int], score_from: int) -> TokenReading:
        """One forward pass; tokens from ``score_from`` (>= 1) on are scored."""
        ...


@dataclass(frozen=True)
class ScoredTokens:
    """Given tokens scored as an answer: each one's log-probability, and what it cost."""

    logp: Any
    usage: CallUsage


class ScoresContinuations(Protocol):
    """A backend that scores given tokens as a chat prompt's answer, through its prompt cache.

    Declared by ``capabilities.scores_continuations``. The prompt is sent as a completion's
    is, so a prefix an earlier call left in the cache is not prefilled again.
    """

    def token_spans(self, text: str) -> list[tuple[int, int, int]]:
        """``text`` tokenized as plain text: (id, start, end) with character offsets."""
        ...

    def score_continuation(self, messages: list[Message], ids: list[int], *,
                           aside: bool = False) -> ScoredTokens:
        """Log-probability of each of ``ids`` as the answer to ``messages``.

        ``aside``: a pass that should not displace the cached prompt (the next completion
        gets back what the cache held before it).
        """
        ...


class KeepsReadings(Protocol):
    """A backend wrapper that stores computed readings (``capabilities.keeps_readings``).

    A reading is a set of named arrays computed from several forward passes; keeping it
    lets a re-run replay the reading as the call cache replays calls.
    """

    def kept_reading(self, key: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The arrays kept under ``key``, or ``compute()``'s, kept and returned."""
        ...


class TakesKeys(Protocol):
    """A backend that can send another credential (``capabilities.takes_keys``).

    The proxy's upstream, when the operator forwards each client's own key.
    """

    def with_key(self, key: str) -> Backend:
        """A copy sending ``key`` as its credential, sharing this backend's connections.

        Close only the backend it came from, never the copy.
        """
        ...


class StreamsText(Protocol):
    """A backend that streams a completion's text as it is written (``capabilities.streams``).

    The proxy's upstream: its reply is checked while it is written, and a client that leaves
    stops it.
    """

    def stream(self, request: CompletionRequest) -> Iterator[str | Completion]:
        """The reply's text as it comes, then its ``Completion`` (the whole text, usage).

        Closing the iterator closes the call: the provider stops writing.
        """
        ...


def streams_text(backend: Backend) -> StreamsText | None:
    """``backend`` as one that streams its text, if its capabilities say so."""
    return cast(StreamsText, backend) if backend.capabilities.streams else None


def takes_keys(backend: Backend) -> TakesKeys | None:
    """``backend`` as one that can send another key, if its capabilities say so."""
    return cast(TakesKeys, backend) if backend.capabilities.takes_keys else None


def counts_tokens(backend: Backend) -> CountsTokens | None:
    """``backend`` as a token counter, if its capabilities say it is one."""
    return cast(CountsTokens, backend) if backend.capabilities.counts_tokens else None


def counted_tokens(backend: Backend, text: str) -> int | None:
    """``text``'s tokens as ``backend`` counts them; None where it cannot count (or failed)."""
    counter = counts_tokens(backend)
    if counter is None:
        return None
    try:
        return counter.count_tokens(text)
    except BackendError:
        return None


def primes_prefix(backend: Backend) -> PrimesPrefix | None:
    """``backend`` as a prefix primer, if its capabilities say it is one."""
    return cast(PrimesPrefix, backend) if backend.capabilities.primes_prefix else None


def reads_hidden_states(backend: Backend) -> ReadsHiddenStates | None:
    """``backend`` as a forward-pass reader, if its capabilities say it is one."""
    return cast(ReadsHiddenStates, backend) if backend.capabilities.hidden_states else None


def scores_continuations(backend: Backend) -> ScoresContinuations | None:
    """``backend`` as a ``ScoresContinuations``, or None if it cannot."""
    return cast(ScoresContinuations, backend) if backend.capabilities.scores_continuations \
        else None


def keeps_readings(backend: Backend) -> KeepsReadings | None:
    """``backend`` as a keeper of readings (the call cache), if its capabilities say so."""
    return cast(KeepsReadings, backend) if backend.capabilities.keeps_readings else None


__getattr__ = renamed(__name__, "Request", CompletionRequest)  # the old name, deprecated
