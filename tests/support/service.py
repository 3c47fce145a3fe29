"""The service under test: the app on uvicorn in a thread, on a loopback socket.

``serving`` yields the base URL; ``KEY`` and ``AUTH`` are the API key it is started with and
the header carrying it; ``_is_problem`` holds an answer to RFC 9457's problem format.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

pytest.importorskip("fastapi")
import uvicorn

from conli.backends.base import Backend
from conli.config import Settings
from conli.service.app import Mount, create_app
from conli.signals.lexical import content_words
from tests.support import scripted

KEY = "test-key-1"
AUTH = {"X-API-Key": KEY}
SOURCE = "The Riverside library opened in 1962. The city council runs it."
RESPONSE = "The library opened in 1962. The library is FALSE run by a charity."


@contextmanager
def serving(settings: Settings, *, sleep: float = 0.0, concurrency: int = 2,
            open_access: bool = False, backend: Backend | None = None,
            mount: Mount | None = None) -> Iterator[str]:
    """Run the app (and ``mount``'s routes) under uvicorn in a thread on a loopback socket."""
    content_words("warm up")  # the first check imports NLTK: seconds on a loaded machine
    app = create_app(settings, open_access=open_access, mount=mount,
                     backend=backend or scripted.backend(sleep=sleep, concurrency=concurrency))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _is_problem(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == status and body["type"].startswith("urn:conli:problem:")
