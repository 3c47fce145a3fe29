"""The model servers a checker's detectors reach beyond its own backend: one backend each.

A checker prepares a plan for every distinct per-call setting (``Checker.prepare``), and
each plan builds its own detectors. A detector with a server of its own (a specialised
checker's ``llm``) takes that server's backend from here, so every plan naming the same
server (and key) shares one backend, one connection pool, however many plans come and go.
Each holder ``acquire``s it and ``release``s it; the last release closes it.

``endpoint_of`` names the server an SDK client calls, as the client resolved it: what
the result cache keys on besides ``--llm`` (``graph.identity``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping
from urllib.parse import urlsplit, urlunsplit

from conli.backends.base import Backend


class Endpoints:
    """Backends shared by key among their holders, each closed when the last lets go."""

    def __init__(self) -> None:
        self._held: dict[Hashable, tuple[Backend, int]] = {}
        self._lock = threading.Lock()

    def acquire(self, key: Hashable, build: Callable[[], Backend]) -> Backend:
        """The backend for ``key``, built by ``build()`` the first time; one more holder."""
        with self._lock:  # one build per key, even when two plans ask at once
            backend, holders = self._held.get(key) or (None, 0)
            if backend is None:
                backend = build()
            self._held[key] = (backend, holders + 1)
            return backend

    def release(self, key: Hashable) -> None:
        """One holder fewer; the last one's release closes the backend."""
        with self._lock:
            backend, holders = self._held[key]
            if holders > 1:
                self._held[key] = (backend, holders - 1)
                return
            del self._held[key]
        backend.close()

    def close(self) -> None:
        """Close every backend still held (the checker is closing)."""
        with self._lock:
            backends, self._held = [backend for backend, _ in self._held.values()], {}
        for backend in backends:
            backend.close()


# the query parameters that choose what a server answers (Azure's api-version); any other
# is left out of an endpoint's name, as it may hold a key
_CHOOSING = ("api-version",)


def endpoint_of(base_url: object, query: Mapping[str, object] | None = None) -> str:
    """The server a client calls: its base URL, with no user or password, and api-version.

    ``base_url`` as the SDK resolved it (``OPENAI_BASE_URL``, Azure's endpoint and
    deployment, a compatible server's URL, ``ANTHROPIC_BASE_URL``); ``query`` the client's
    default query. Never a credential: the URL's user and password, and its query other
    than the api-version, are dropped.
    """
    parts = urlsplit(str(base_url))
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    chosen = "&".join(f"{name}={query[name]}" for name in _CHOOSING if query and name in query)
    return urlunsplit((parts.scheme, netloc, parts.path, chosen, ""))
