"""HTTP failures of any provider mapped once onto conli's error tree, SDK-free.

Each provider module catches its own SDK's exceptions and hands the status code, headers
and message here, so "429 means RateLimitError with Retry-After" is decided in one place.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from conli.backends.http_limits import reply_cap_error
from conli.errors import (
    AuthenticationError,
    BackendError,
    BadRequestError,
    RateLimitError,
    ReplyTooLargeError,
    TransientBackendError,
)

_TRANSIENT_4XX = frozenset({408, 409, 425})


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the provider asks us to wait: ``retry-after-ms``, else ``retry-after``.

    ``retry-after`` may be seconds (possibly fractional) or an HTTP date.
    """
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def error_for_status(
    provider: str,
    status: int,
    message: str,
    headers: Mapping[str, str] | None = None,
    code: str | None = None,
) -> BackendError:
    """Return the conli error for an HTTP error status, saying what to fix."""
    detail = f"{provider} returned HTTP {status}: {message}"
    if status in (401, 403):
        return AuthenticationError(
            f"{detail}. Check the API key or token (and its permissions) for {provider}."
        )
    if status == 429:
        if code == "insufficient_quota":  # OpenAI's "out of credit": waiting cannot help
            return BadRequestError(f"{detail}. The account has no quota left.")
        return RateLimitError(detail, retry_after=retry_after_seconds(headers))
    if status >= 500 or status in _TRANSIENT_4XX:
        return TransientBackendError(detail)
    if status == 404:
        return BadRequestError(f"{detail}. Check the model or deployment name and the endpoint.")
    return BadRequestError(detail)


def server_label(name: str, url: str | None = None) -> str:
    """How a message names a server: its backend's name, and where it is when told."""
    return name if url is None else f"{name} at {url}"


def transport_error(sdk: Any, provider: str, exc: Exception, timeout: float, *,
                    url: str | None = None) -> BackendError | None:
    """The error for a call that got no HTTP status, or None: the caller maps the rest.

    ``sdk`` is the provider's SDK module; ``provider`` the backend's name and ``url`` the
    server's base URL where the backend was given one (``vllm`` at ``http://host:8000/v1``).
    openai and anthropic share these exception classes (timeouts are connection errors, so
    they are tested first). An over-cap reply raises ``ReplyTooLargeError`` in the HTTP
    client, and SDKs that wrap every transport failure in ``APIConnectionError`` would hide
    it: it is unwrapped, not called transient.
    """
    where = server_label(provider, url)
    too_large = reply_cap_error(exc)
    if too_large is not None:
        return ReplyTooLargeError(str(too_large))
    if isinstance(exc, sdk.APITimeoutError):
        return TransientBackendError(f"{where} did not answer within {timeout:g}s")
    if isinstance(exc, sdk.APIConnectionError):
        requested = getattr(getattr(exc, "request", None), "url", None)
        if requested is None:
            return TransientBackendError(f"could not reach {where}: {exc}")
        # the request's URL says more than the base URL: the name, then it
        return TransientBackendError(f"could not reach {provider} at {requested}: {exc}")
    if isinstance(exc, sdk.APIResponseValidationError):
        return TransientBackendError(f"{where} sent a malformed reply: {exc}")
    return None
