"""Backends looked up by name from one spec string (``local``, ``fake``, ...)."""

from __future__ import annotations

from collections.abc import Callable

from conli.backends.base import Backend, CallUsage, Completion, CompletionRequest, Message
from conli.config import BackendSettings
from conli.errors import ConfigError
from conli.version import renamed

Factory = Callable[[str, BackendSettings], Backend]
# A factory that also takes the key of its endpoint (``get_backend(..., api_key=...)``).
KeyedFactory = Callable[[str, BackendSettings, str | None], Backend]


def _local(_arg: str, settings: BackendSettings) -> Backend:
    from conli.backends.local import LocalBackend

    return LocalBackend(settings)


# Each SDK is imported only inside its own module, when its backend is asked for.
def _openai(arg: str, settings: BackendSettings, api_key: str | None = None) -> Backend:
    from conli.backends.openai_backend import openai_backend

    return openai_backend(arg, settings, api_key=api_key)


def _azure(arg: str, settings: BackendSettings) -> Backend:
    from conli.backends.azure_backend import azure_backend

    return azure_backend(arg, settings)


def _anthropic(arg: str, settings: BackendSettings) -> Backend:
    from conli.backends.anthropic_backend import anthropic_backend

    return anthropic_backend(arg, settings)


def _vllm(arg: str, settings: BackendSettings, api_key: str | None = None) -> Backend:
    from conli.backends.openai_compat import compat_backend

    return compat_backend(arg, settings, api_key=api_key)


def _llamacpp(arg: str, settings: BackendSettings, api_key: str | None = None) -> Backend:
    from conli.backends.openai_compat import compat_backend

    return compat_backend(arg, settings, name="llamacpp", api_key=api_key)


def _ollama(arg: str, settings: BackendSettings, api_key: str | None = None) -> Backend:
    from conli.backends.openai_compat import compat_backend, ollama_spec

    return compat_backend(ollama_spec(arg), settings, name="ollama", api_key=api_key)


_REGISTRY: dict[str, Factory] = {
    "local": _local,
    "openai": _openai,
    "azure": _azure,
    "anthropic": _anthropic,
    "vllm": _vllm,
    "llamacpp": _llamacpp,  # llama.cpp's llama-server speaks the same API
    "ollama": _ollama,  # ollama:MODEL, its OpenAI-compatible endpoint on the default port
}
_BUILT_IN = dict(_REGISTRY)
# the backends a key of the endpoint's own can be given to (the others read their own variables)
_KEYED: dict[str, KeyedFactory] = {"openai": _openai, "vllm": _vllm, "llamacpp": _llamacpp,
                                   "ollama": _ollama}


def register_backend(name: str, factory: Factory) -> None:
    """Add a provider: ``factory(arg, settings)`` gets the text after ``name:``."""
    _REGISTRY[name] = factory


def backend_names() -> list[str]:
    """Names a spec may start with."""
    return sorted(_REGISTRY)


def backend_factory(spec: str) -> tuple[Factory, str]:
    """The factory a spec names and the text after its ``name:`` (``ConfigError`` if unknown).

    For a caller that builds the backend elsewhere (Ray ships the factory to its actors).
    """
    name, _, arg = spec.partition(":")
    factory = _REGISTRY.get(name.strip().lower())
    if factory is None:
        raise ConfigError(f"unknown backend {name!r}; valid backends: {', '.join(backend_names())}")
    return factory, arg


def _built_in(name: str) -> bool:
    """Whether ``name`` is still the built-in backend (a plugin may register over it)."""
    return _REGISTRY.get(name) is _BUILT_IN.get(name)


def get_backend(spec: str, settings: BackendSettings, *, api_key: str | None = None) -> Backend:
    """Build the backend a spec names, e.g. ``local`` or ``openai:gpt-4o-mini``.

    ``api_key``: the key of this endpoint (a detector's own server), sent to it and to no
    other; a backend that reads its credentials only from its own variables refuses one.
    """
    factory, arg = backend_factory(spec)
    if api_key is None:
        return factory(arg, settings)
    name = spec.partition(":")[0].strip().lower()
    keyed = _KEYED.get(name)
    if keyed is None or not _built_in(name):
        raise ConfigError(f"backend {name!r} takes no key of its endpoint's own; a key can be "
                          f"given to {', '.join(sorted(_KEYED))}")
    return keyed(arg, settings, api_key)


__all__ = [
    "Backend",
    "CallUsage",
    "Completion",
    "CompletionRequest",
    "Message",
    "backend_names",
    "get_backend",
    "register_backend",
]


__getattr__ = renamed(__name__, "Request", CompletionRequest)  # the old name, deprecated
