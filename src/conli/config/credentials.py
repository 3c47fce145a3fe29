"""Provider credentials and ``.env``: the variables that are never settings, read here only.

Keys and endpoints belong to their providers (``OPENAI_API_KEY``, ``VLLM_API_KEY``, ...);
``conli.config`` holds conli's own ``CONLI_*`` settings. A key goes only to the endpoint it
was given for, so each is read by name, where it is used.
"""

from __future__ import annotations

import os
from pathlib import Path

from conli.errors import ConfigError

# Provider variables conli reads (SDKs read their own keys, e.g. OPENAI_API_KEY, too).
PROVIDER_VARIABLES = (
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN",
    "VLLM_API_KEY",
    "AZURE_LANGUAGE_ENDPOINT",
    "AZURE_LANGUAGE_KEY",
    "OLLAMA_HOST",
)



ENV_FILE = ".env"  # read by the command line at start (``load_env_file``)


def load_env_file(path: str | Path = ENV_FILE) -> list[str]:
    """Put ``path``'s variables (default ``./.env``) in the environment, never over one set.

    The command line calls it first, so ``CONLI_*`` settings and provider keys
    (``OPENAI_API_KEY``, ``OLLAMA_HOST``, ...) in ``.env`` apply as if exported; a variable
    already in the environment wins. A library caller may call it as well. Returns the names
    it set; a missing file sets none, one that is not UTF-8 is a ``ConfigError``.
    """
    from dotenv import dotenv_values  # python-dotenv, which pydantic-settings brings

    file = Path(path)
    if not file.is_file():
        return []
    try:
        values = dotenv_values(file, encoding="utf-8", interpolate=False)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file} is not UTF-8 text (byte {exc.start})") from exc
    loaded = [name for name, value in values.items()
              if value is not None and name not in os.environ]
    for name in loaded:
        os.environ[name] = values[name] or ""
    return loaded


def provider_variable(name: str) -> str | None:
    """A provider's own environment variable (a key or endpoint), or None if unset or empty."""
    if name not in PROVIDER_VARIABLES:
        raise KeyError(f"{name} is not a provider variable conli reads")
    return os.environ.get(name) or None


def named_key(variable: str, what: str) -> str:
    """The key in the environment variable a setting names for one endpoint (``what``).

    ``ConfigError`` if it is unset or empty: a key named for a server is never silently
    dropped, and no other variable's key is sent in its place.
    """
    value = os.environ.get(variable)
    if not value:
        raise ConfigError(f"{what} names {variable} for its key, but {variable} is not set")
    return value
