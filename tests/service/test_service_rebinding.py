"""Open mode refuses what a web page could send: DNS rebinding and cross-site requests (32.6)."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest

pytest.importorskip("fastapi")

from conli.config import Settings
from tests.support.service import AUTH, KEY, SOURCE, _is_problem, serving

BODY = {"source": SOURCE, "response": "The library opened in 1962."}
STREAMED = b'{"source": "The library opened in 1962."}\n{"text": "It opened in 1962."}\n'


def test_open_mode_refuses_a_foreign_host_and_cross_site_browser_requests() -> None:
    with serving(Settings(), open_access=True) as base:
        here = urlsplit(base).netloc
        rebound = {"Host": f"attacker.example:{urlsplit(base).port}"}
        _is_problem(httpx.post(f"{base}/v1/judge", json=BODY, headers=rebound), 403)
        _is_problem(httpx.get(f"{base}/healthz", headers=rebound), 403)
        _is_problem(httpx.get(f"{base}/metrics", headers=rebound), 403)
        # what a cross-site form or fetch() can send without a preflight: text/plain
        cross = {"Origin": "https://attacker.example", "Content-Type": "text/plain"}
        refused = httpx.post(f"{base}/v1/check/stream", content=STREAMED, headers=cross)
        _is_problem(refused, 403)
        assert "origin" in refused.json()["detail"]
        _is_problem(httpx.post(f"{base}/v1/judge", json=BODY,
                               headers={"Sec-Fetch-Site": "cross-site"}), 403)
        # local clients, and the service's own /docs page (same origin), still work
        assert httpx.post(f"{base}/v1/judge", json=BODY).status_code == 200
        assert httpx.post(f"{base}/v1/judge", json=BODY,
                          headers={"Origin": f"http://{here}"}).status_code == 200
        assert httpx.post(f"{base}/v1/judge", json=BODY, headers={
            "Host": f"localhost:{urlsplit(base).port}"}).status_code == 200
        streamed = httpx.post(f"{base}/v1/check/stream", content=STREAMED, timeout=30)
        assert streamed.status_code == 200 and streamed.text.strip().endswith("}")


def test_keyed_mode_is_unchanged_behind_a_proxy() -> None:
    with serving(Settings(service_api_keys=[KEY])) as base:
        proxied = {**AUTH, "Host": "conli.internal.example", "Origin": "https://app.example"}
        assert httpx.post(f"{base}/v1/judge", json=BODY, headers=proxied).status_code == 200
        _is_problem(httpx.post(f"{base}/v1/judge", json=BODY,
                               headers={"Origin": "https://app.example"}), 401)
