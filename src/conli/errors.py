"""Every error conli raises, in one tree, so callers can catch at the depth they need.

    ConliError
    ├── ConfigError             bad settings or backend spec (lists the valid choices)
    ├── InputError              the user's source/response cannot be checked as given
    │   ├── EmptyInputError         empty or whitespace-only text
    │   ├── EncodingError           not UTF-8, or binary (NUL bytes)
    │   ├── InputTooLargeError      over the configured character limit
    │   └── ContextOverflowError    prompt would not fit the model's context window
    ├── BackendError            a model call failed
    │   ├── BackendUnavailableError the backend cannot start (missing extra, model file)
    │   ├── AuthenticationError     credentials rejected: fix the key, never retried
    │   ├── BadRequestError         the provider refused the request as malformed: not retried
    │   └── TransientBackendError   429 / 5xx / timeout / connection: retried with backoff
    │       └── RateLimitError          429, carries the provider's Retry-After if any
    ├── OutputParseError        model output did not validate after the bounded re-ask
    └── ModelStoreError         the embedded model could not be assembled or verified

Checks that hit a BackendError or OutputParseError become verdict ``unverified``;
they never surface as ``supported``.
"""

from __future__ import annotations


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


class BackendError(ConliError):
    """A model call failed."""


class BackendUnavailableError(BackendError):
    """The backend cannot be started (missing optional extra, missing model file)."""


class AuthenticationError(BackendError):
    """Credentials were rejected; retrying cannot help."""


class BadRequestError(BackendError):
    """The provider rejected the request itself; retrying cannot help."""


class TransientBackendError(BackendError):
    """A failure that may pass: rate limit, server error, timeout, dropped connection."""


class RateLimitError(TransientBackendError):
    """HTTP 429; ``retry_after`` is the provider's requested wait in seconds, if given."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OutputParseError(ConliError):
    """Model output that failed validation even after the bounded re-ask."""


class ModelStoreError(ConliError):
    """The embedded model file could not be assembled or failed its checksum."""
