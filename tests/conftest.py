"""Fixtures every folder's tests share; the helpers they build on live in ``tests/support``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conli.backends import register_backend
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.hook import close_shared_checkers
from tests.support import scripted
from tests.support.fake_clock import FakeClock, install
from tests.support.paths import TESTS
from tests.support.readers import ReadingBackend
from tests.support.responders import rule_responder

# Areas whose every test goes through a door over loopback (the service on uvicorn, the proxy
# before a fake upstream). Elsewhere a test file (pytestmark) or a test says it itself.
INTEGRATION_AREAS = {"service", "proxy"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.path.is_relative_to(TESTS / area) for area in INTEGRATION_AREAS):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _no_result_cache_unless_a_test_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    """``conli check`` and ``batch`` keep a result cache by default: tests count model calls,
    so each runs without one (tests/library/test_result_cache.py turns it on, in its own folder)."""
    monkeypatch.setenv("CONLI_RESULT_CACHE", "false")


@pytest.fixture(autouse=True)
def _no_shared_checker_outlives_its_test() -> Iterator[None]:
    """``acheck`` without a checker shares one per settings; a test's own is closed after it."""
    yield
    close_shared_checkers()


@pytest.fixture
def settings() -> Settings:
    return Settings(_env_file=None)  # type: ignore[call-arg]


@pytest.fixture
def make_backend() -> Callable[..., ScriptedBackend]:
    def make(**kwargs: Any) -> ScriptedBackend:
        return ScriptedBackend(responder=rule_responder(**kwargs))

    return make


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """A fake clock behind the check's deadline and the retry waits: no test sleeps."""
    return install(monkeypatch)


@pytest.fixture
def fake() -> None:
    """``--llm fake`` is the scripted model, whatever an earlier test registered under it."""
    register_backend("fake", lambda _arg, _settings: scripted.backend())


@pytest.fixture
def reading_backend() -> None:
    """``--llm reading`` is the tiny reader with the eval tests' string-matching answers."""
    register_backend("reading", lambda _arg, _settings: ReadingBackend())
