"""Operating the service: request ids, /metrics, /readyz, JSON logs (real HTTP, real process)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
from prometheus_client.parser import text_string_to_metric_families

from conli.backends.base import Message
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.errors import BackendUnavailableError
from tests.support import scripted
from tests.support.paths import ROOT
from tests.support.service import AUTH, KEY, RESPONSE, SOURCE, _is_problem, serving


def test_every_answer_and_problem_carries_the_request_id() -> None:
    with serving(Settings(service_api_keys=[KEY])) as base:
        given = httpx.get(f"{base}/healthz", headers={"X-Request-ID": "req-42.a"})
        assert given.headers["x-request-id"] == "req-42.a"
        refused = httpx.post(f"{base}/v1/check", json={}, headers={"X-Request-ID": "req-43"})
        _is_problem(refused, 401)
        assert refused.json()["request_id"] == refused.headers["x-request-id"] == "req-43"
        invalid = httpx.post(f"{base}/v1/check", json={"source": 1}, headers=AUTH)
        _is_problem(invalid, 422)
        made = invalid.headers["x-request-id"]
        assert len(made) >= 16 and invalid.json()["request_id"] == made
        # an id that is not a short token (a log-injection attempt) is replaced, not echoed
        odd = httpx.get(f"{base}/healthz", headers={"X-Request-ID": "a\tb" + "x" * 200})
        assert odd.headers["x-request-id"] != "a\tb" + "x" * 200
        ok = httpx.post(f"{base}/v1/check", json={"source": SOURCE, "response": RESPONSE},
                        headers={**AUTH, "X-Request-ID": "req-44"})
        assert ok.status_code == 200 and ok.headers["x-request-id"] == "req-44"


def _samples(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = httpx.get(f"{base}/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(answer.text) for s in family.samples}


def test_metrics_count_requests_verdicts_model_use_and_errors_by_kind() -> None:
    with serving(Settings(service_api_keys=[KEY])) as base:
        body = {"source": SOURCE, "response": RESPONSE}
        checked = httpx.post(f"{base}/v1/check", json=body, headers=AUTH).json()
        judged = httpx.post(f"{base}/v1/judge", json=body, headers=AUTH).json()
        httpx.post(f"{base}/v1/check", json=body)  # 401
        httpx.post(f"{base}/v1/check/batch", headers=AUTH, json={"items": [
            {"source": "  ", "response": "x"}, {"source": SOURCE, "response": "It opened."}]})
        seen = _samples(base)
    assert seen[("conli_verdicts_total", (("verdict", "hallucinated"),))] == 1
    assert seen[("conli_verdicts_total", (("verdict", "supported"),))] == 1  # the batch's
    calls = checked["usage"]["calls"] + judged["usage"]["calls"]
    assert seen[("conli_model_calls_total", ())] >= calls > 0
    assert seen[("conli_model_tokens_total", (("kind", "prompt"),))] > 0
    assert seen[("conli_errors_total", (("kind", "unauthorized"),))] == 1
    assert seen[("conli_errors_total", (("kind", "unusable-input"),))] == 1  # the batch item
    assert seen[("conli_http_requests_total", (("route", "/v1/check"), ("status", "200")))] == 1
    assert seen[("conli_http_requests_total", (("route", "/v1/check"), ("status", "401")))] == 1
    assert seen[("conli_http_request_seconds_count", (("route", "/v1/judge"),))] == 1


def test_readyz_is_503_with_the_reason_while_the_backend_cannot_be_reached() -> None:
    down = {"now": True}

    def respond(messages: list[Message]) -> str:
        if down["now"]:
            raise BackendUnavailableError("connection refused: http://10.0.0.9:8000/v1")
        return scripted.responder()(messages)

    model = ScriptedBackend(responder=respond, judges_batches=True)
    with serving(Settings(service_api_keys=[KEY]), backend=model) as base:
        assert httpx.get(f"{base}/healthz").status_code == 200  # alive all the same
        not_ready = httpx.get(f"{base}/readyz")
        _is_problem(not_ready, 503)
        assert "connection refused" in not_ready.json()["detail"]
        down["now"] = False
        body = {"source": SOURCE, "response": "The library opened in 1962."}
        assert httpx.post(f"{base}/v1/check", json=body, headers=AUTH).status_code == 200
        ready = httpx.get(f"{base}/readyz")
        assert ready.status_code == 200 and ready.json()["backend"] == "fake"
        down["now"] = True  # a check that finds the backend gone makes it unready again
        _is_problem(httpx.post(f"{base}/v1/check", json=body, headers=AUTH), 503)
        _is_problem(httpx.get(f"{base}/readyz"), 503)


def test_readyz_probes_the_backend_once_before_any_check() -> None:
    with serving(Settings(service_api_keys=[KEY])) as base:
        assert httpx.get(f"{base}/readyz").status_code == 200


def test_readyz_answers_at_once_while_the_backend_hangs_and_probes_it_once() -> None:
    """A hanging backend: each /readyz answers within a 1 s client timeout, with the reason,
    and one probe runs however many ask (issue 52.5: each waited 10 s and left a thread)."""
    release = threading.Event()

    def hang(messages: list[Message]) -> str:
        release.wait(60)
        return "OK"

    model = ScriptedBackend(responder=hang, judges_batches=True)
    with serving(Settings(service_api_keys=[KEY]), backend=model) as base:
        try:
            for _ in range(5):
                answer = httpx.get(f"{base}/readyz", timeout=1.0)
                _is_problem(answer, 503)
                assert "not been reached" in answer.json()["detail"]
            assert len(model.calls) == 1  # one probe, still hanging; no thread per request
            assert sum(t.name == "conli-readyz-probe" for t in threading.enumerate()) == 1
        finally:
            release.set()
        for _ in range(50):  # the probe answered: ready, from the state it left
            if httpx.get(f"{base}/readyz", timeout=1.0).status_code == 200:
                break
            time.sleep(0.1)
        else:
            pytest.fail("/readyz never became ready once the backend answered")
        assert len(model.calls) == 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_conli_serve_logs_json_lines_with_the_request_id(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CONLI_TEST_FAKE": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.batch_runner", "serve", "--llm", "fake", "--open",
         "--port", str(port), "--log-format", "json", "--log-level", "info"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, server.communicate()
            try:
                httpx.get(f"{base}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "conli serve did not start"
                time.sleep(0.2)
        answer = httpx.post(f"{base}/v1/check", json={"source": SOURCE, "response": RESPONSE},
                            headers={"X-Request-ID": "trace-7"}, timeout=60)
        assert answer.status_code == 200
    finally:
        server.terminate()
        _out, err = server.communicate(timeout=30)
    lines: list[dict[str, Any]] = [json.loads(line) for line in err.splitlines() if line]
    assert lines and all({"time", "level", "logger", "message", "request_id"} <= set(line)
                         for line in lines)
    access = [line for line in lines if line.get("request_id") == "trace-7"]
    assert access and access[0]["status"] == 200 and access[0]["path"] == "/v1/check"
