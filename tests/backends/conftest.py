"""The backends' shared fixture: a real llama.cpp server on loopback (real-model tests only)."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from conli.config import Settings


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """Base URL of a llama.cpp server on loopback serving the embedded model."""
    xllamacpp = pytest.importorskip("xllamacpp")
    from conli.backends.model_store import ensure_model

    settings = Settings()
    model = settings.local_model or ensure_model(Path(settings.cache_dir) / "models")
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # let the server pick a free port
    params.n_ctx = 1024
    params.n_parallel = 1
    params.cpuparams.n_threads = 2
    params.cpuparams_batch.n_threads = 2
    params.warmup = False
    params.verbosity = -1
    server = xllamacpp.Server(params)
    url = server.listening_address.rstrip("/")
    assert url.startswith("http://127.0.0.1:")
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
                if reply.status == 200:
                    break
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail("llama.cpp server did not become healthy")
            time.sleep(0.5)
    yield url
    del server
