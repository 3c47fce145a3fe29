"""The HTTP service, over real HTTP against uvicorn on 127.0.0.1 (a random free port)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from conli.cli.app import main
from conli.config import Settings
from conli.errors import ConfigError
from conli.service.app import create_app
from tests.support import scripted
from tests.support.paths import ROOT
from tests.support.service import AUTH, KEY, RESPONSE, SOURCE, _is_problem, serving


def test_three_modes_do_what_they_say(url: str) -> None:
    body = {"source": SOURCE, "response": RESPONSE}
    health = httpx.get(f"{url}/healthz")
    assert health.status_code == 200 and health.json()["backend"] == "fake"

    checked = httpx.post(f"{url}/v1/check", json=body, headers=AUTH).json()
    assert checked["verdict"] == "hallucinated"
    assert [s["verdict"] for s in checked["sentences"]] == ["supported", "hallucinated"]
    assert checked["mitigation"]["status"] == "disabled"  # detect only
    assert checked["refined_text"] == RESPONSE and checked["judge_refined"] is None

    rewritten = httpx.post(f"{url}/v1/rewrite", json=body, headers=AUTH).json()
    assert rewritten["mitigation"]["status"] == "rewritten"
    assert "FALSE" not in rewritten["refined_text"]
    assert rewritten["refined_text"].startswith("The library opened in 1962. ")

    judged = httpx.post(f"{url}/v1/judge", json=body, headers=AUTH).json()
    # grounded by default: detection runs, and the reasoning is written from its finding
    assert judged["judge"]["status"] == "scored" and judged["judge"]["mode"] == "grounded"
    assert judged["judge"]["score"] < 3 and judged["judge"]["audit"]["sentences"]
    assert judged["judge"]["reasoning_by"] == "findings.v1" and judged["usage"]["calls"] >= 1


def test_api_key_is_required_on_v1_only(url: str) -> None:
    body = {"source": SOURCE, "response": RESPONSE}
    _is_problem(httpx.post(f"{url}/v1/check", json=body), 401)
    _is_problem(httpx.post(f"{url}/v1/check", json=body, headers={"X-API-Key": "wrong"}), 401)
    # unauthenticated garbage is refused as unauthenticated: nothing about the body leaks
    _is_problem(httpx.post(f"{url}/v1/judge", content=b"{not json"), 401)
    assert httpx.post(f"{url}/v1/judge", json=body, headers=AUTH).status_code == 200
    assert httpx.get(f"{url}/healthz").status_code == 200


def test_running_open_needs_the_flag_and_loopback() -> None:
    with pytest.raises(ConfigError, match="API keys"):
        create_app(Settings(), backend=scripted.backend())
    with serving(Settings(), open_access=True) as base:
        response = httpx.post(f"{base}/v1/judge", json={"source": SOURCE, "response": RESPONSE})
        assert response.status_code == 200  # a loopback client, no key needed
    assert main(["serve", "--open", "--host", "0.0.0.0"]) == 2  # refused before binding


def test_size_and_sentence_limits() -> None:
    settings = Settings(service_api_keys=[KEY], service_max_body_bytes=2_000,
                        max_response_chars=500, service_max_sentences=3)
    with serving(settings) as base:
        big = {"source": SOURCE, "response": "x" * 3_000}
        _is_problem(httpx.post(f"{base}/v1/check", json=big, headers=AUTH), 413)

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted while streaming
            yield b'{"source": "s", "response": "'
            for _ in range(50):
                yield b"y" * 100
            yield b'"}'

        _is_problem(httpx.post(f"{base}/v1/check", content=chunks(),
                               headers={**AUTH, "content-type": "application/json"}), 413)
        long_text = {"source": SOURCE, "response": "z" * 600}
        _is_problem(httpx.post(f"{base}/v1/check", json=long_text, headers=AUTH), 413)
        many = {"source": SOURCE, "response": " ".join(f"Fact {i} holds." for i in range(5))}
        response = httpx.post(f"{base}/v1/rewrite", json=many, headers=AUTH)
        _is_problem(response, 413)
        assert "5 sentences" in response.json()["detail"]
        few = {"source": SOURCE, "response": "Fact one holds. Fact two holds."}
        assert httpx.post(f"{base}/v1/check", json=few, headers=AUTH).status_code == 200


MALFORMED: list[tuple[bytes, dict[str, str]]] = [
    (b"", {}),
    (b"{", {}),
    (b"[]", {}),
    (b'"text"', {}),
    (b"null", {}),
    (b'{"source": 1, "response": "r"}', {}),
    (b'{"source": "s"}', {}),
    (b'{"source": "s", "response": "r", "extra": true}', {}),
    (b'{"source": "s", "response": "\\ud800"}', {}),
    (b'{"source": "s", "response": "\\u0000"}', {}),
    (b'{"source": "   ", "response": "r"}', {}),
    (b"\xff\xfe\x00garbage", {}),
    (b"[" * 50_000, {}),
    (b'{"source": "s", "response": "r"}', {"content-type": "text/plain"}),
    (b'<xml version="1.0"/>', {"content-type": "application/xml"}),
]


@pytest.mark.parametrize(("body", "headers"), MALFORMED)
def test_malformed_bodies_are_4xx_never_500(url: str, body: bytes, headers: dict[str, str]) -> None:
    for path in ("/v1/check", "/v1/rewrite", "/v1/judge"):
        response = httpx.post(f"{url}{path}", content=body,
                              headers={"content-type": "application/json", **AUTH, **headers})
        assert 400 <= response.status_code < 500, (path, body[:40], response.text)
        assert response.headers["content-type"].startswith("application/problem+json")


def test_unknown_routes_and_methods_are_problems(url: str) -> None:
    _is_problem(httpx.get(f"{url}/v1/check", headers=AUTH), 405)
    _is_problem(httpx.get(f"{url}/nope"), 404)


def test_full_service_answers_429_with_retry_after() -> None:
    settings = Settings(service_api_keys=[KEY], service_max_concurrent=1,
                        service_retry_after_seconds=3)
    with serving(settings, sleep=0.4) as base:
        body = {"source": SOURCE, "response": "The library opened in 1962."}

        def call(_: int) -> httpx.Response:
            return httpx.post(f"{base}/v1/judge", json=body, headers=AUTH, timeout=30)

        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(call, range(6)))
        codes = sorted(a.status_code for a in answers)
        assert 200 in codes and 429 in codes and set(codes) <= {200, 429}
        busy = next(a for a in answers if a.status_code == 429)
        _is_problem(busy, 429)
        assert busy.headers["retry-after"] == "3"
        time.sleep(0.5)  # once the slot is free, the service answers again
        assert call(0).status_code == 200


def test_slow_request_times_out_with_504_and_frees_its_slot() -> None:
    settings = Settings(service_api_keys=[KEY], service_timeout_seconds=0.3,
                        service_max_concurrent=1)
    with serving(settings, sleep=1.0) as base:
        body = {"source": SOURCE, "response": "The library opened in 1962."}
        started = time.monotonic()
        _is_problem(httpx.post(f"{base}/v1/judge", json=body, headers=AUTH, timeout=30), 504)
        assert time.monotonic() - started < 0.9
        # the timed-out work still holds the only slot until its thread ends...
        _is_problem(httpx.post(f"{base}/v1/judge", json=body, headers=AUTH), 429)
        time.sleep(1.0)
        # ...and then the slot is free again (this call takes 1s: give it more time)
        settled = httpx.post(f"{base}/v1/check", json=body, headers=AUTH, timeout=30)
        assert settled.status_code in (200, 504)


def test_openapi_documents_examples_auth_and_problems(url: str) -> None:
    schema = httpx.get(f"{url}/openapi.json").json()
    assert set(schema["paths"]) >= {"/v1/check", "/v1/rewrite", "/v1/judge", "/healthz"}
    request = schema["components"]["schemas"]["CheckRequest"]
    assert request["examples"][0]["source"]
    assert schema["components"]["securitySchemes"]["APIKeyHeader"]["name"] == "X-API-Key"
    answers = schema["paths"]["/v1/check"]["post"]["responses"]
    assert {"401", "413", "422", "429", "504"} <= set(answers)
    assert "application/problem+json" in answers["429"]["content"]


def _schemathesis() -> list[str] | None:
    found = shutil.which("st") or (Path(sys.executable).parent / "st")
    return [str(found)] if Path(found).exists() else None


def test_schemathesis_finds_no_server_errors(tmp_path: Path) -> None:
    st = _schemathesis()
    if st is None:
        pytest.skip("schemathesis is not installed (pip install -e '.[dev]')")
    with serving(Settings(service_api_keys=[KEY]), concurrency=4) as base:
        run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run
        done = run(
            [*st, "run", f"{base}/openapi.json", "--url", base, "-H", f"X-API-Key: {KEY}",
             "--checks", "not_a_server_error", "--max-examples", "15", "--seed", "5",
             "--workers", "1", "--generation-database", "none", "--no-color"],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
            env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.support.schemathesis_hooks",
                 "PYTHONPATH": str(ROOT)},
        )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
