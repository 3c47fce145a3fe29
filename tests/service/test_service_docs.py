"""The service's documentation pages work offline: every asset they load is served by conli."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

pytest.importorskip("fastapi")

from conli.config import Settings
from tests.support.service import KEY, serving

# what a page loads: src/href attributes, and the URLs Swagger UI's script is given
_LOADS = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|\burl:\s*["']([^"']+)["']""")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_reference_no_external_host(page: str) -> None:
    with serving(Settings(service_api_keys=[KEY])) as base:
        html = httpx.get(f"{base}{page}")
        assert html.status_code == 200 and "text/html" in html.headers["content-type"]
        loads = [a or b for a, b in _LOADS.findall(html.text)]
        assert any(u.endswith(".js") for u in loads), loads  # the page does load its script
        for url in loads:
            absolute = urljoin(f"{base}{page}", url)
            assert urlsplit(absolute).netloc == urlsplit(base).netloc, url  # no CDN
            assert httpx.get(absolute).status_code == 200, url  # and conli serves it
        assert "cdn." not in html.text and "fonts.googleapis" not in html.text
