"""A request answered 504 stops its check: no model call starts after the answer (32.5)."""

from __future__ import annotations

import time

import httpx
import pytest

pytest.importorskip("fastapi")

from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from tests.support import scripted
from tests.support.service import AUTH, KEY, SOURCE, _is_problem, serving

MANY = " ".join(f"The library opened in 1962 and fact {n} holds." for n in range(8))


@pytest.mark.parametrize("path", ["/v1/check", "/v1/check/batch"])
def test_a_timed_out_request_stops_calling_the_backend_and_frees_its_slot(path: str) -> None:
    # one claim per call, one call at a time, 0.3 s each: the check needs about 3 s
    model = ScriptedBackend(responder=scripted.responder(sleep=0.3), judges_batches=False,
                            max_concurrency=1)
    settings = Settings(service_api_keys=[KEY], service_timeout_seconds=0.8,
                        service_max_concurrent=1)
    item = {"source": SOURCE, "response": MANY}
    body = {"items": [item]} if path.endswith("batch") else item
    with serving(settings, backend=model) as base:
        answer = httpx.post(f"{base}{path}", json=body, headers=AUTH, timeout=30)
        calls_at_answer = len(model.calls)
        if path.endswith("batch"):
            (entry,) = answer.json()["results"]
            assert entry["error"]["status"] == 504
        else:
            _is_problem(answer, 504)
        assert 0 < calls_at_answer < 8
        time.sleep(1.5)  # long enough for several more calls, had the check gone on
        assert len(model.calls) == calls_at_answer  # none started after the answer
        # the call running at the answer has ended, so the only slot is free again
        again = httpx.post(f"{base}/v1/judge", json={"source": SOURCE, "response": "It opened."},
                           headers=AUTH, timeout=30)
        assert again.status_code == 200
