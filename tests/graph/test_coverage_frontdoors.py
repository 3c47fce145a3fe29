"""Coverage (seed 001) through the front doors: the library, the HTTP service and batch.

The model is ``eval_fakes``' string matcher (a claim is entailed iff its text occurs in the
premise), so a point is covered iff the response states it word for word; its coverage
fix writes the point itself as the added sentence.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import conli
from conli import pipeline
from conli.backends.base import Message
from conli.backends.fake import ScriptedBackend
from conli.batch.local import run
from conli.batch.work import make_worker
from conli.cli import batch as batch_cli
from conli.cli.app import main
from conli.config import Settings
from conli.pipeline import Checker
from tests.support import eval_fakes

SOURCE = "The library opened in 1962. The city council runs it. It lends bicycles."
RESPONSE = "The library opened in 1962. The city council runs it."
POINTS = ["The library opened in 1962", "The city council runs it", "It lends bicycles"]
EXPECTED = ["covered", "covered", "uncovered"]
KEY = "cover-key"
AUTH = {"X-API-Key": KEY}

# (JSON of a points value, the error type a batch record names): each one unusable
BAD_POINTS: list[tuple[str, str]] = [
    ("[]", "EmptyInputError"),
    ("{}", "EmptyInputError"),
    ('{"facts": []}', "EmptyInputError"),
    ("5", "InputError"),
    ('"It lends bicycles"', "InputError"),
    ("[5]", "EncodingError"),
    ('["fine", "   "]', "EmptyInputError"),
    ('["It lends \\u0007bicycles"]', "EncodingError"),
    ('["It lends \\ud800 bicycles"]', "EncodingError"),
    ('{"facts": ["ok"], "more": "not a list"}', "InputError"),
    (json.dumps([f"point {i}" for i in range(201)]), "InputTooLargeError"),
]


def respond(messages: list[Message]) -> str:
    """``eval_fakes.respond``, plus the coverage fix: the added sentence is the point."""
    if "You add one missing point" in messages[0]["content"]:
        point = re.findall(r"<point>(.*?)</point>", messages[-1]["content"], re.S)[-1]
        return json.dumps({"sentence": point.strip().rstrip(".") + "."})
    return eval_fakes.respond(messages)


def cover_backend() -> ScriptedBackend:
    """The string-matching model, able to write coverage fixes, two calls at a time."""
    return ScriptedBackend(responder=respond, max_concurrency=2)


def _verdicts(result: dict[str, Any]) -> list[str]:
    return [p["verdict"] for p in result["coverage"]["points"]]


def _settings(**given: Any) -> Settings:
    return Settings(_env_file=None, judge=False, **given)  # type: ignore[call-arg]


# --- library ------------------------------------------------------------------------------


def test_library_check_and_acheck_take_points(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "get_backend", lambda _spec, _settings: cover_backend())
    result = conli.check(SOURCE, RESPONSE, _settings(mitigate=False), points=POINTS)
    assert result.verdict == "supported" and result.coverage is not None
    assert result.coverage.verdict == "uncovered"
    assert [p.verdict for p in result.coverage.points] == EXPECTED
    assert [p.point for p in result.coverage.points] == POINTS

    checker = Checker(_settings(fix_coverage=True), backend=cover_backend())
    fixed = asyncio.run(conli.acheck(SOURCE, RESPONSE, checker=checker,
                                     points={"facts": POINTS}))
    assert [v.name for v in fixed.coverage.perspectives] == ["facts"]  # type: ignore[union-attr]
    assert [a.point for a in fixed.mitigation.added if a.added] == [POINTS[2]]
    assert fixed.refined_text == RESPONSE + " It lends bicycles."
    one_shot = asyncio.run(conli.acheck(SOURCE, SOURCE, _settings(), points=POINTS))
    assert one_shot.coverage is not None and one_shot.coverage.verdict == "covered"


def test_library_refuses_bad_points_before_any_model_call() -> None:
    backend = cover_backend()
    checker = Checker(_settings(), backend=backend)
    before = len(backend.calls)
    for text, kind in BAD_POINTS:
        with pytest.raises(conli_error(kind)):
            checker.check(SOURCE, RESPONSE, points=json.loads(text))
    assert len(backend.calls) == before


def conli_error(name: str) -> type[BaseException]:
    """The ``conli.errors`` class called ``name``."""
    from conli import errors

    error: type[BaseException] = getattr(errors, name)
    return error


# --- HTTP ---------------------------------------------------------------------------------


@pytest.fixture
def served() -> Iterator[tuple[str, ScriptedBackend]]:
    """The service on loopback, fixing coverage by default; its URL and its model."""
    pytest.importorskip("fastapi")
    from tests.support.service import serving

    backend = cover_backend()
    with serving(_settings(service_api_keys=[KEY], fix_coverage=True), backend=backend) as url:
        yield url, backend


def _post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, headers=AUTH, timeout=60)


@pytest.mark.integration
def test_http_check_reports_the_dropped_point_and_adds_nothing(
    served: tuple[str, ScriptedBackend],
) -> None:
    url, _ = served
    answer = _post(url, "/v1/check", {"source": SOURCE, "response": RESPONSE, "points": POINTS})
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["verdict"] == "supported" and result["coverage"]["verdict"] == "uncovered"
    assert _verdicts(result) == EXPECTED
    assert result["coverage"]["perspectives"][0]["name"] == "points"
    # check detects only: the service's fix_coverage default does not add a sentence
    assert result["mitigation"]["added"] == [] and result["refined_text"] == RESPONSE
    plain = _post(url, "/v1/check", {"source": SOURCE, "response": RESPONSE}).json()
    assert plain["coverage"]["verdict"] is None and plain["coverage"]["points"] == []


@pytest.mark.integration
def test_http_rewrite_fixes_coverage_unless_the_request_says_not_to(
    served: tuple[str, ScriptedBackend],
) -> None:
    url, _ = served
    body = {"source": SOURCE, "response": RESPONSE, "points": {"facts": POINTS}}
    fixed = _post(url, "/v1/rewrite", body).json()
    assert _verdicts(fixed) == EXPECTED
    assert fixed["coverage"]["perspectives"] == [
        {"name": "facts", "score": fixed["coverage"]["score"], "verdict": "uncovered"}]
    added = [a for a in fixed["mitigation"]["added"] if a["added"]]
    assert [(a["perspective"], a["index"]) for a in added] == [("facts", 2)]
    assert fixed["refined_text"] == RESPONSE + " It lends bicycles."

    kept = _post(url, "/v1/rewrite", {**body, "fix_coverage": False}).json()
    assert _verdicts(kept) == EXPECTED
    assert kept["mitigation"]["added"] == [] and kept["refined_text"] == RESPONSE


@pytest.mark.integration
def test_http_routes_take_only_what_they_use(served: tuple[str, ScriptedBackend]) -> None:
    url, _ = served
    texts = {"source": SOURCE, "response": RESPONSE}
    for path, body in (("/v1/check", {**texts, "points": POINTS, "fix_coverage": True}),
                       ("/v1/judge", {**texts, "points": POINTS})):
        answer = _post(url, path, body)
        assert answer.status_code == 422, (path, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
    assert _post(url, "/v1/judge", texts).status_code == 200


@pytest.mark.integration
@pytest.mark.parametrize(("points", "kind"), BAD_POINTS)
def test_http_bad_points_are_a_clean_4xx_and_no_model_call(
    served: tuple[str, ScriptedBackend], points: str, kind: str,
) -> None:
    url, backend = served
    before = len(backend.calls)
    texts = json.dumps({"source": SOURCE, "response": RESPONSE})[:-1]
    raw = f'{texts}, "points": {points}}}'.encode()
    for path in ("/v1/check", "/v1/rewrite"):
        answer = httpx.post(f"{url}{path}", content=raw, timeout=60,
                            headers={**AUTH, "content-type": "application/json"})
        status = 413 if kind == "InputTooLargeError" else 422
        assert answer.status_code == status, (path, points[:40], answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
        problem = answer.json()
        assert problem["status"] == status and "points" in problem["detail"]
        # refused for what the points hold, not as a field the route does not know
        assert all(e["type"] != "extra_forbidden" for e in problem.get("errors", []))
    assert len(backend.calls) == before


@pytest.mark.integration
def test_openapi_shows_points_and_fix_coverage(served: tuple[str, ScriptedBackend]) -> None:
    url, _ = served
    schemas = httpx.get(f"{url}/openapi.json").json()["components"]["schemas"]
    assert schemas["CheckRequest"]["examples"][0]["points"]
    assert "points" in schemas["CheckRequest"]["properties"]
    rewrite = schemas["RewriteRequest"]
    assert rewrite["examples"][0]["fix_coverage"] is True
    assert {"points", "fix_coverage"} <= set(rewrite["properties"])
    assert "points" not in schemas["JudgeRequest"]["properties"]


# --- batch --------------------------------------------------------------------------------


def _out(path: Path) -> list[dict[str, Any]]:
    """Every OUT line, parsed: a torn line would fail here."""
    raw = path.read_bytes()
    assert raw.endswith(b"\n"), "OUT must end on a whole line"
    return [json.loads(line) for line in raw.decode("utf-8").splitlines()]


def _line(record_id: str, points: str | None, response: str = RESPONSE) -> str:
    texts = json.dumps({"id": record_id, "source": SOURCE, "response": response})
    return texts if points is None else f'{texts[:-1]}, "points": {points}}}'


def test_batch_points_give_coverage_and_bad_points_give_error_records(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    bad = [_line(f"bad{n}", points) for n, (points, _) in enumerate(BAD_POINTS)]
    good = [_line("list", json.dumps(POINTS)), _line("facts", json.dumps({"facts": POINTS})),
            _line("none", None)]
    src.write_text("\n".join([*bad[:5], *good, *bad[5:]]) + "\n", encoding="utf-8")
    summary = run(src, out, make_worker(_settings(), "check", cover_backend()),
                  concurrency=2, progress=False)

    rows = {r["id"]: r for r in _out(out)}
    assert len(rows) == len(bad) + len(good) == summary.processed
    assert summary.errors == len(bad) and summary.stopped is None
    for n, (_, kind) in enumerate(BAD_POINTS):
        row = rows[f"bad{n}"]
        assert row["ok"] is False and row["retryable"] is False, row
        assert row["error"]["type"] == kind and "result" not in row
        assert "points" in row
    for name in ("list", "facts"):
        assert rows[name]["ok"] is True and _verdicts(rows[name]["result"]) == EXPECTED
    assert rows["list"]["points"] == POINTS and rows["facts"]["points"] == {"facts": POINTS}
    assert rows["facts"]["result"]["coverage"]["perspectives"][0]["name"] == "facts"
    assert rows["none"]["result"]["coverage"]["points"] == [] and "points" not in rows["none"]


def test_batch_cli_fix_coverage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_cli, "get_backend", lambda _spec, _settings: cover_backend())
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(_line("r1", json.dumps(POINTS)) + "\n" + _line("r2", "[]") + "\n",
                   encoding="utf-8")
    assert main(["batch", str(src), str(out), "--mode", "check", "--fix-coverage"]) == 2
    assert not out.exists()  # refused before any record ran

    code = main(["batch", str(src), str(out), "--mode", "rewrite", "--fix-coverage",
                 "--no-progress"])
    assert code == 1  # r2's points are empty: one error record, the run goes on
    rows = {r["id"]: r for r in _out(out)}
    error = rows["r2"]["error"]
    assert error["type"] == "EmptyInputError" and "points" in error["message"]
    result = rows["r1"]["result"]
    assert _verdicts(result) == EXPECTED
    assert result["refined_text"] == RESPONSE + " It lends bicycles."
    assert [a["index"] for a in result["mitigation"]["added"] if a["added"]] == [2]
