"""The service's shared fixture: the app on uvicorn over loopback, keyed with ``KEY``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conli.config import Settings


@pytest.fixture
def url() -> Iterator[str]:
    # imported here: tests.support.service skips without fastapi, which a conftest may not
    from tests.support.service import KEY, serving

    with serving(Settings(service_api_keys=[KEY])) as base:
        yield base
