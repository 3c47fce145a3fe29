"""Per-request options (an allow-list) and ``POST /v1/check/batch``, over real loopback HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from conli.backends.base import Message
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.errors import AuthenticationError
from tests.support import scripted
from tests.support.service import AUTH, KEY, RESPONSE, SOURCE, _is_problem, serving

GOOD = "The library opened in 1962."


@pytest.fixture(scope="module")
def url() -> Any:
    # three looks: the scripted model gives no log-probabilities, and a threshold needs
    # scores that rank (one look's would be its verdict, and the threshold is refused)
    with serving(Settings(service_api_keys=[KEY], nli_looks=3)) as base:
        yield base


def test_allowed_options_change_only_that_request(url: str) -> None:
    body = {"source": SOURCE, "response": GOOD}
    plain = httpx.post(f"{url}/v1/check", json=body, headers=AUTH).json()
    barred = httpx.post(f"{url}/v1/check", json={**body, "options": {"threshold": 0.99}},
                        headers=AUTH).json()
    assert plain["threshold"] is None and barred["threshold"] == 0.99
    grounded = httpx.post(f"{url}/v1/judge", json={"source": SOURCE, "response": RESPONSE},
                          headers=AUTH).json()
    rubric = httpx.post(f"{url}/v1/judge", headers=AUTH, json={
        "source": SOURCE, "response": RESPONSE, "options": {"judge_mode": "rubric"}}).json()
    assert rubric["judge"]["mode"] == "rubric" and grounded["judge"]["mode"] == "grounded"
    chosen = httpx.post(f"{url}/v1/check", json={**body, "options": {"detector": "cot"}},
                        headers=AUTH)
    assert chosen.status_code == 200
    again = httpx.post(f"{url}/v1/check", json=body, headers=AUTH).json()
    assert again["threshold"] is None  # nothing leaked into the service's settings


@pytest.mark.parametrize(("options", "named"), [
    ({"llm": "openai:gpt-4o"}, "'llm'"),
    ({"mitigate": True}, "'mitigate' cannot be set per request"),  # an option, not the service's
    ({"max_response_chars": 10**9}, "'max_response_chars'"),
    ({"detector": "telepathy"}, "'telepathy'"),
    ({"threshold": 2}, "threshold"),
    ({"judge_mode": "vibes"}, "judge_mode"),
])
def test_other_options_are_a_422_that_names_them(url: str, options: dict[str, Any],
                                                  named: str) -> None:
    for path in ("/v1/check", "/v1/judge"):
        answer = httpx.post(f"{url}{path}", headers=AUTH,
                            json={"source": SOURCE, "response": GOOD, "options": options})
        _is_problem(answer, 422)
        assert named in answer.json()["detail"], answer.json()


def test_a_detector_the_backend_cannot_run_is_a_422_not_a_500(url: str) -> None:
    answer = httpx.post(f"{url}/v1/check", headers=AUTH, json={
        "source": SOURCE, "response": GOOD, "options": {"detector": "fast"}})
    _is_problem(answer, 422)
    assert "options" in answer.json()["detail"]


def test_batch_answers_in_input_order_with_an_error_in_the_failing_item_place(url: str) -> None:
    items = [{"source": SOURCE, "response": RESPONSE},
             {"source": "   ", "response": GOOD},  # unusable: an error entry, in place 1
             {"source": SOURCE, "response": GOOD},
             {"source": SOURCE, "response": GOOD, "options": {"threshold": 0.5}}]
    answer = httpx.post(f"{url}/v1/check/batch", headers=AUTH,
                        json={"items": items, "options": {"threshold": 0.9}}, timeout=30)
    assert answer.status_code == 200, answer.text
    entries = answer.json()["results"]
    assert [e["index"] for e in entries] == [0, 1, 2, 3]
    assert [e["ok"] for e in entries] == [True, False, True, True]
    assert entries[0]["result"]["verdict"] == "hallucinated"
    assert entries[2]["result"]["verdict"] == "supported"
    assert entries[1]["error"]["status"] == 422 and entries[1]["result"] is None
    assert entries[1]["error"]["type"] == "urn:conli:problem:unusable-input"
    assert [entries[i]["result"]["threshold"] for i in (0, 2, 3)] == [0.9, 0.9, 0.5]
    assert answer.json()["failed"] == 1


def test_batch_is_bounded() -> None:
    with serving(Settings(service_api_keys=[KEY], service_batch_max_items=3)) as base:
        item = {"source": SOURCE, "response": GOOD}
        too_many = httpx.post(f"{base}/v1/check/batch", json={"items": [item] * 4}, headers=AUTH)
        _is_problem(too_many, 413)
        assert "CONLI_SERVICE_BATCH_MAX_ITEMS" in too_many.json()["detail"]
        _is_problem(httpx.post(f"{base}/v1/check/batch", json={"items": []}, headers=AUTH), 422)
        _is_problem(httpx.post(f"{base}/v1/check/batch", headers=AUTH,
                               json={"items": [item], "options": {"llm": "x"}}), 422)
        assert httpx.post(f"{base}/v1/check/batch", json={"items": [item] * 3},
                          headers=AUTH, timeout=30).status_code == 200
        _is_problem(httpx.post(f"{base}/v1/check/batch", json={"items": [item]}), 401)


def test_a_backend_failure_is_that_item_error_and_the_rest_go_on() -> None:
    def respond(messages: list[Message]) -> str:
        if "charity" in messages[-1]["content"]:
            raise AuthenticationError("the key was rejected")
        return scripted.responder()(messages)

    model = ScriptedBackend(responder=respond, judges_batches=True, max_concurrency=2)
    with serving(Settings(service_api_keys=[KEY]), backend=model) as base:
        items = [{"source": SOURCE, "response": GOOD},
                 {"source": SOURCE, "response": "It is run by a charity."},
                 {"source": SOURCE, "response": GOOD}]
        entries = httpx.post(f"{base}/v1/check/batch", json={"items": items}, headers=AUTH,
                             timeout=30).json()["results"]
    assert [e["ok"] for e in entries] == [True, False, True]
    assert entries[1]["error"]["status"] == 502
    assert "rejected" in entries[1]["error"]["detail"]


def test_two_hundred_requests_of_one_plan_build_its_detectors_once(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The prepared run context is kept per plan: not rebuilt (nor its calibration re-read)
    for every request, as it was while each request prepared its own."""
    import conli.detectors

    built: list[list[str]] = []
    build = conli.detectors.build

    def counted(names: list[str], *args: Any, **kwargs: Any) -> Any:
        built.append(list(names))
        return build(names, *args, **kwargs)

    monkeypatch.setattr(conli.detectors, "build", counted)
    body = {"source": SOURCE, "response": GOOD, "options": {"detector": "cot", "threshold": 0.4}}
    with httpx.Client(base_url=url, headers=AUTH, timeout=30) as client:
        answers = [client.post("/v1/check", json=body) for _ in range(200)]
    assert [a.status_code for a in answers] == [200] * 200
    assert {a.json()["threshold"] for a in answers} == {0.4}
    assert len(built) == 1, f"{len(built)} builds for 200 requests of one plan"
