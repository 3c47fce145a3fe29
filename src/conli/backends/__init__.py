"""Backends looked up by name from one spec string (``local``, ``fake``, ...)."""

from __future__ import annotations

from collections.abc import Callable

from conli.backends.base import Backend, CallUsage, Completion, Message, Request
from conli.config import BackendSettings
from conli.errors import ConfigError

Factory = Callable[[str, BackendSettings], Backend]


def _local(_arg: str, settings: BackendSettings) -> Backend:
    from conli.backends.local import LocalBackend

    return LocalBackend(settings)


# Each SDK is imported only inside its own module, when its backend is asked for.
def _openai(arg: str, settings: BackendSettings) -> Backend:
    from conli.backends.openai_backend import openai_backend

    return openai_backend(arg, settings)


def _azure(arg: str, settings: BackendSettings) -> Backend:
    from conli.backends.azure_backend import azure_backend

    return azure_backend(arg, settings)


def _anthropic(arg: str, settings: BackendSettings) -> Backend:
    from conli.backends.anthropic_backend import anthropic_backend

    return anthropic_backend(arg, settings)


def _vllm(arg: str, settings: BackendSettings) -> Backend:
    from conli.backends.openai_compat import compat_backend

    return compat_backend(arg, settings)


def _llamacpp(arg: str, settings: BackendSettings) -> Backend:
    from conli.backends.openai_compat import compat_backend

    return compat_backend(arg, settings, name="llamacpp")


def _ollama(arg: str, settings: BackendSettings) -> Backend:
    from conli.backends.openai_compat import compat_backend, ollama_spec

    return compat_backend(ollama_spec(arg), settings, name="ollama")


_REGISTRY: dict[str, Factory] = {
    "local": _local,
    "openai": _openai,
    "azure": _azure,
    "anthropic": _anthropic,
    "vllm": _vllm,
    "llamacpp": _llamacpp,  # llama.cpp's llama-server speaks the same API
    "ollama": _ollama,  # ollama:MODEL, its OpenAI-compatible endpoint on the default port
}


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


def get_backend(spec: str, settings: BackendSettings) -> Backend:
    """Build the backend a spec names, e.g. ``local`` or ``openai:gpt-4o-mini``."""
    factory, arg = backend_factory(spec)
    return factory(arg, settings)


__all__ = [
    "Backend",
    "CallUsage",
    "Completion",
    "Message",
    "Request",
    "backend_names",
    "get_backend",
    "register_backend",
]
