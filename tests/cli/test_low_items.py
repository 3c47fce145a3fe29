"""The low items of issue 62.7, each through the front door where it was found.

A response of invisible characters alone is empty (and they buy a stream no rate); the
threshold refusal for a specialised checker suggests what applies to it; ``passed: no``
never sits beside a support score above the bar without saying why; ``/v1/judge`` bounds
its ``responses`` as a batch bounds its items; a batch refused at start writes no OUT.
(The CSV export is in ``test_batch_ids``, ``/readyz`` in ``test_service_endpoints``.)
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from conli.cli.app import main
from conli.config import Settings
from tests.support.http_fakes import Reply, Request, openai_chat, serve

SOURCE = "The library opened in 1962. It lends books free of charge."
INVISIBLE = "\u200b\u2060\ufeff\u00ad\u200b \u2060\n\u00ad"


pytestmark = pytest.mark.usefixtures("fake")


def _files(tmp_path: Path, response: str) -> list[str]:
    (tmp_path / "s.txt").write_text(SOURCE)
    (tmp_path / "r.txt").write_text(response)
    return ["--source", str(tmp_path / "s.txt"), "--response", str(tmp_path / "r.txt")]


def test_a_response_of_invisible_characters_is_empty(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", *_files(tmp_path, INVISIBLE), "--llm", "fake", "--no-judge"])
    assert code == 2
    assert "response is empty: it holds only invisible characters" in capsys.readouterr().err


@pytest.mark.integration
def test_invisible_characters_buy_a_stream_no_rate() -> None:
    """Zero-width spaces at 100 a second would pass a rate of 40 if they counted."""
    pytest.importorskip("fastapi")
    from tests.support.service import serving
    from tests.support.service_streams import HTTP_SOURCE, RawStream, _run, _send_every, _settings

    settings = _settings(service_max_streams=1, service_stream_idle_seconds=1.0,
                         service_stream_min_rate=40.0, service_timeout_seconds=60)
    with serving(settings) as base:

        async def invisible() -> list[dict[str, Any]]:
            client = await RawStream.open(base)
            await client.send({"source": HTTP_SOURCE})
            sender = asyncio.create_task(_send_every(client, 0.05, "\u200b" * 5, times=400))
            assert await client.head() == 200
            lines = await client.rest()
            sender.cancel()
            return lines

        lines = _run(invisible)
    assert [line["event"] for line in lines] == ["error"], lines
    assert "CONLI_SERVICE_STREAM_MIN_RATE" in lines[0]["detail"]
    assert "sent 0 characters of the reply" in lines[0]["detail"]


def test_the_threshold_refusal_for_a_checker_suggests_what_applies_to_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """MiniCheck on a backend without log-probabilities: more NLI looks do nothing for it."""
    code = main(["check", *_files(tmp_path, "It opened in 1962."), "--llm", "fake",
                 "--detector", "minicheck", "--threshold", "0.5", "--no-judge"])
    err = capsys.readouterr().err
    assert code == 2
    assert "reports no log-probabilities" in err and "CONLI_NLI_LOOKS" not in err
    assert "give minicheck a server that reports them" in err


def _verdict_only(request: Request) -> Reply:
    """A MiniCheck server that answers Yes without log-probabilities."""
    return Reply(200, openai_chat("Yes", completion=1))


@pytest.mark.integration
def test_passed_no_says_why_beside_a_verdict_standing_in_as_the_score(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with serve(_verdict_only) as checker:
        monkeypatch.setenv("CONLI_DETECTOR_OPTIONS", json.dumps(
            {"minicheck": {"llm": f"vllm:{checker.url}/v1#checker"}}))
        code = main(["check", *_files(tmp_path, "The library opened in 1962."), "--llm",
                     "fake", "--detector", "minicheck", "--threshold", "0.5", "--no-judge",
                     "--no-mitigate", "-q"])
    out = capsys.readouterr().out
    assert code == 0
    (line,) = [x for x in out.splitlines() if x.startswith("passed:")]
    assert line == ("passed: no (support score 1 is the verdict standing in (score_method "
                    "verdict), not a score that ranks, so threshold 0.5 cannot be passed)")


@pytest.mark.integration
def test_judge_bounds_its_responses_as_a_batch_bounds_its_items() -> None:
    pytest.importorskip("fastapi")
    from tests.support.service import AUTH, KEY, serving

    with serving(Settings(service_api_keys=[KEY], service_batch_max_items=3)) as base:
        answer = httpx.post(f"{base}/v1/judge", headers=AUTH, timeout=30, json={
            "source": SOURCE, "responses": ["It opened in 1962."] * 4})
        assert answer.status_code == 413, answer.text
        assert "4 responses; the limit is 3" in answer.json()["detail"]
        assert "CONLI_SERVICE_BATCH_MAX_ITEMS" in answer.json()["detail"]
        fits = httpx.post(f"{base}/v1/judge", headers=AUTH, timeout=60, json={
            "source": SOURCE, "responses": ["It opened in 1962."] * 3})
        assert fits.status_code == 200 and len(fits.json()["texts"]) == 3


def test_a_batch_refused_at_start_leaves_no_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps({"id": "a", "source": SOURCE, "response": "It opened."}) + "\n")
    code = main(["batch", str(src), str(out), "--llm", "fake", "--detector", "nosuch",
                 "--no-progress"])
    assert code == 2 and "unknown detector 'nosuch'" in capsys.readouterr().err
    assert not out.exists()
