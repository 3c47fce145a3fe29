"""OpenAI-compatible servers (vLLM, llama.cpp's llama-server) through the ``openai`` SDK.

Spec: ``vllm:http://host:8000/v1#<model>`` or ``llamacpp:...`` (the backend is named after
the spec, in results and messages); ``ollama:MODEL`` is Ollama's endpoint on its default
port, or on ``OLLAMA_HOST``'s server as Ollama's own clients read it
(``ollama:http://host:11434/v1#MODEL`` names a server outright). Without ``#<model>`` the
server's first listed model is used. A key goes only to the server it was given for:
an endpoint's own (``get_backend(..., api_key=...)``: a detector's ``api_key_env``), else
``VLLM_API_KEY``, and that only to the server ``--llm`` names (``CONLI_LLM``); never
``OPENAI_API_KEY``, so a self-hosted server never receives an OpenAI key. Both servers
continue a trailing assistant message, which ``conli generate`` and label scoring need.
"""

from __future__ import annotations

from urllib.parse import urlparse

from conli.backends.http_errors import server_label
from conli.backends.openai_backend import (
    OpenAIChatBackend,
    build_client,
    import_openai,
    map_openai_error,
)
from conli.config import BackendSettings
from conli.config.credentials import provider_variable
from conli.errors import ConfigError


def parse_compat_spec(arg: str, name: str = "vllm") -> tuple[str, str | None]:
    """Split ``http://host:8000/v1#model`` into the base URL and the model (or None)."""
    url, _, model = arg.strip().partition("#")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(
            f"not a server URL: {url!r}; write the spec as {name}:http://host:8000/v1#<model>"
        )
    return url.rstrip("/"), model.strip() or None


OLLAMA_URL = "http://localhost:11434/v1"  # Ollama's OpenAI-compatible endpoint, default port
OLLAMA_PORT = 11434


def ollama_spec(arg: str) -> str:
    """``ollama:MODEL`` as the URL spec the compatible backend reads (a URL passes as given).

    The server is ``OLLAMA_HOST``'s, as Ollama's own clients read it (``ollama_url``).
    """
    arg = arg.strip()
    if arg.startswith(("http://", "https://")):
        return arg
    if not arg:
        raise ConfigError("the ollama backend needs a model: ollama:bespoke-minicheck")
    return f"{ollama_url(provider_variable('OLLAMA_HOST'))}#{arg}"


def ollama_url(host: str | None) -> str:
    """Ollama's OpenAI-compatible endpoint on ``host`` (``OLLAMA_HOST``), as Ollama reads it.

    ``host``, ``host:port``, ``:port`` or a URL (``http://host``: its scheme's port); without
    a port, 11434; unset or empty, ``localhost:11434``.
    """
    given = (host or "").strip()
    if not given:
        return OLLAMA_URL
    scheme, has_scheme, rest = given.partition("://")
    if not has_scheme:
        scheme, rest = "http", given
    try:
        parsed = urlparse(f"{scheme}://{rest}")
        port = parsed.port
    except ValueError as exc:
        raise ConfigError(f"OLLAMA_HOST={given!r} is not a host: {exc}") from exc
    if scheme not in ("http", "https"):
        raise ConfigError(f"OLLAMA_HOST={given!r} is not a host, host:port or http(s) URL")
    name = parsed.hostname or "localhost"
    name = f"[{name}]" if ":" in name else name  # an IPv6 address
    if port is None:
        port = {"http": 80, "https": 443}[scheme] if has_scheme else OLLAMA_PORT
    return f"{scheme}://{name}:{port}{parsed.path.rstrip('/')}/v1"


COMPAT_NAMES = ("vllm", "llamacpp", "ollama")


def origin(url: str) -> tuple[str, str, int]:
    """A URL's scheme, host and port: the server a key belongs to."""
    parsed = urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return parsed.scheme, (parsed.hostname or "").lower(), port


def llm_url(spec: str) -> str | None:
    """The server URL of an OpenAI-compatible ``--llm`` spec (None for any other backend)."""
    name, _, arg = spec.partition(":")
    name = name.strip().lower()
    if name not in COMPAT_NAMES:
        return None
    try:
        return parse_compat_spec(ollama_spec(arg) if name == "ollama" else arg, name)[0]
    except ConfigError:
        return None


def key_for(url: str, settings: BackendSettings, api_key: str | None) -> str | None:
    """The key to send ``url``: its own, else ``VLLM_API_KEY`` if it is ``--llm``'s server."""
    if api_key:
        return api_key
    run = llm_url(settings.llm)
    if run is None or origin(run) != origin(url):
        return None  # VLLM_API_KEY is --llm's key: another server never receives it
    return provider_variable("VLLM_API_KEY")


def compat_backend(arg: str, settings: BackendSettings, name: str = "vllm",
                   api_key: str | None = None) -> OpenAIChatBackend:
    """``vllm:URL#model`` (or ``llamacpp:``): a server speaking OpenAI's chat completions.

    ``api_key``: the server's own key; without one, ``key_for`` decides.
    """
    url, model = parse_compat_spec(arg, name)
    openai = import_openai()
    client = build_client(
        openai.OpenAI,
        server_label(name, url),
        base_url=url,
        api_key=key_for(url, settings, api_key) or "not-needed",
        timeout=settings.request_timeout,
    )
    if model is None:
        try:
            listed = [m.id for m in client.models.list()]
        except openai.OpenAIError as exc:
            client.close()
            raise map_openai_error(exc, name, settings.request_timeout, url=url) from exc
        if not listed:
            client.close()
            raise ConfigError(f"{url} lists no models; name one: {name}:{url}#<model>")
        model = listed[0]
    # vLLM and llama.cpp read max_tokens; not every server knows max_completion_tokens.
    return OpenAIChatBackend(
        client, name=name, model=model, settings=settings, token_param="max_tokens",
        continues_assistant=True, url=url,
    )
