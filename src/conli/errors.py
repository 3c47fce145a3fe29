"""Every error conli raises, in one tree, so callers can catch at the depth they need.

    ConliError
    ├── ConfigError             bad settings or backend spec (lists the valid choices)
    ├── InputError              the user's source/response cannot be checked as given
    │   ├── EmptyInputError         empty or whitespace-only text
    │   ├── EncodingError           not UTF-8, or binary (NUL bytes)
    │   ├── InputTooLargeError      over the configured character limit
    │   ├── ContextOverflowError    prompt would not fit the model's context window
    │   └── UnsupportedRequestError a request field conli cannot honour (the proxy's n > 1)
    ├── BackendError            a model call failed
    │   ├── BackendUnavailableError the backend cannot start (missing extra, model file)
    │   ├── AuthenticationError     credentials rejected: fix the key, never retried
    │   ├── BadRequestError         the provider refused the request as malformed: not retried
    │   ├── ReplyTooLargeError      a reply over the size cap: a misbehaving server, not retried
    │   ├── TransientBackendError   429 / 5xx / timeout / connection: retried with backoff
    │   │   └── RateLimitError          429, carries the provider's Retry-After if any
    │   └── DeadlineExceededError   the whole check ran past its deadline
    ├── CheckCancelledError     the caller cancelled the check (an async task that was cancelled)
    ├── UnsupportedAnswerError  check_node(on_flag="raise"): the checked answer is not supported
    ├── OutputParseError        model output did not validate after the bounded re-ask
    └── ModelStoreError         the embedded model could not be assembled or verified

A model answer that never validates leaves its check ``unverified``; a backend that cannot
be used (any ``BackendError``) fails the whole check. Neither ever surfaces as ``supported``.
``boundary`` maps every error, once, to what the user sees: exit code and HTTP status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


def validation_problems(errors: Iterable[Mapping[str, Any]], whole: str) -> str:
    """Pydantic's errors as ``field.path: message; ...``; ``whole`` names one on the whole."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or whole}: {e['msg']}"
                     for e in errors)


def install_hint(extra: str) -> str:
    """How to add one of conli's extras, e.g. ``openai``: conli is installed from a clone.

    conli is not on PyPI, so a bare ``pip install 'conli[openai]'`` finds nothing in a fresh
    environment; in one that already has conli (from a clone or a wheel) pip reads the
    extra from the installed conli, so that form adds it there.
    """
    return (f"pip install -e '.[{extra}]' in conli's clone "
            f"(or pip install 'conli[{extra}]' into this environment)")


class ConliError(Exception):
    """Root of every error conli raises on purpose."""


class ConfigError(ConliError):
    """Settings or a backend spec that cannot be used."""


class InputError(ConliError):
    """The inputs cannot be checked as given; nothing was run."""


class EmptyInputError(InputError):
    """A source or response that is empty or only whitespace."""


class EncodingError(InputError):
    """Bytes that are not UTF-8 text (or contain NUL, i.e. look binary)."""


class InputTooLargeError(InputError):
    """Text longer than the configured maximum."""


class ContextOverflowError(InputError):
    """The source plus prompt does not fit the model's context window."""


class UnsupportedRequestError(InputError):
    """A request conli cannot serve as asked (a field it cannot honour, a body of no known shape).

    ``param`` names the field, as OpenAI's error shape does.
    """

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class BackendError(ConliError):
    """A model call failed."""


class BackendUnavailableError(BackendError):
    """The backend cannot be started (missing optional extra, missing model file)."""


class AuthenticationError(BackendError):
    """Credentials were rejected; retrying cannot help."""


class BadRequestError(BackendError):
    """The provider rejected the request itself; retrying cannot help."""


class ReplyTooLargeError(BackendError):
    """A reply body over the size cap (or compressed, so uncappable); the rest went unread.

    Not transient: the cap is far above any real answer, so a server passing it is
    misbehaving, and a retry would read another cap's worth for the same result.
    """


class TransientBackendError(BackendError):
    """A failure that may pass: rate limit, server error, timeout, dropped connection."""


class RateLimitError(TransientBackendError):
    """HTTP 429; ``retry_after`` is the provider's requested wait in seconds, if given."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class DeadlineExceededError(BackendError):
    """The check ran past ``CONLI_CHECK_DEADLINE_SECONDS``; no further call was started."""


class CheckCancelledError(ConliError):
    """The caller stopped waiting (``acheck``'s task was cancelled); no further call started.

    Raised at the next model call's start (``run.context.check_deadline``), in the thread
    still running the abandoned check, so it ends there instead of making its other calls.
    """


class UnsupportedAnswerError(ConliError):
    """``check_node(on_flag="raise")``: the answer's verdict is not ``supported``.

    The check completed (or could not: ``unverified``); ``verdict`` says which, and
    ``result`` is the whole result as JSON (what ``conli check --json`` prints).
    """

    def __init__(self, message: str, *, verdict: str, result: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.verdict = verdict
        self.result = result


class OutputParseError(ConliError):
    """Model output that failed validation even after the bounded re-ask."""


class ModelStoreError(ConliError):
    """The embedded model file could not be assembled or failed its checksum."""


class UnknownSettingWarning(UserWarning):
    """A ``CONLI_*`` variable that is no setting (a typo): ignored, and named once a process.

    Not an error (outside the tree above): the settings that are known still hold.
    """


@dataclass(frozen=True)
class Boundary:
    """How an error reaches the user: CLI exit code, HTTP status and problem type."""

    exit_code: int
    http_status: int
    slug: str
    title: str


EXIT_INTERRUPTED = 130
# Not an error: ``conli check --fail-on`` ran the check, and its result failed that gate.
EXIT_GATE_FAILED = 4

# Most specific first; the first class an error is an instance of decides.
_TABLE: tuple[tuple[type[BaseException], Boundary], ...] = (
    (InputTooLargeError, Boundary(2, 413, "too-large", "input too large")),
    (ContextOverflowError, Boundary(2, 413, "too-large", "input too large for the model")),
    (UnsupportedRequestError, Boundary(2, 400, "unsupported", "the request cannot be served as "
                                       "asked")),
    (InputError, Boundary(2, 422, "unusable-input", "the input cannot be checked")),
    (ConfigError, Boundary(2, 500, "config", "the service is misconfigured")),
    (DeadlineExceededError, Boundary(3, 504, "timeout", "the check ran past its deadline")),
    (BackendUnavailableError, Boundary(3, 503, "backend-unavailable",
                                       "the model backend is unavailable")),
    (ModelStoreError, Boundary(3, 503, "backend-unavailable", "the model backend is unavailable")),
    (TransientBackendError, Boundary(3, 503, "backend-unavailable",
                                     "the model backend did not answer; retry later")),
    (BackendError, Boundary(3, 502, "backend", "the model backend failed")),
    (OutputParseError, Boundary(3, 502, "backend", "the model answer was unusable")),
    (CheckCancelledError, Boundary(EXIT_INTERRUPTED, 499, "cancelled",
                                   "the caller cancelled the check")),
    (UnsupportedAnswerError, Boundary(EXIT_GATE_FAILED, 422, "not-supported",
                                      "the answer is not supported by its source")),
    (ConliError, Boundary(2, 500, "internal", "internal error")),
)
UNEXPECTED = Boundary(1, 500, "internal", "internal error")


def boundary(error: BaseException) -> Boundary:
    """The exit code and HTTP status for ``error`` (the one table both front doors use)."""
    for kind, answer in _TABLE:
        if isinstance(error, kind):
            return answer
    return UNEXPECTED


def error_classes() -> list[tuple[type[BaseException], Boundary]]:
    """The table, for documentation and the service's OpenAPI."""
    return list(_TABLE)
