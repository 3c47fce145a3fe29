"""Streams cannot starve the service: an idle-read limit, and slots of their own (issue 32.4).

The idle clock counts only the server's waiting on the client: a client waiting for a slow
verdict is not idle; and a stream that trickles is cut by the minimum rate (issue 47.1).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from tests.support import scripted
from tests.support.service import KEY, serving
from tests.support.service_streams import HTTP_SOURCE, RawStream, _run, _send_every, _settings

CHECK = {"source": HTTP_SOURCE, "response": "The library opened in 1962."}


def _next_stream(base: str) -> list[dict[str, Any]]:
    """A stream opened just after another ended: its events, once its head said 200."""
    async def next_stream() -> list[dict[str, Any]]:
        await asyncio.sleep(0.2)
        client = await RawStream.open(base)
        await client.send({"source": HTTP_SOURCE})
        await client.send({"text": "The library opened in 1962."})
        await client.end()
        assert await client.head() == 200  # the one stream slot is free again
        return await client.rest()

    return _run(next_stream)


def test_open_streams_do_not_take_the_check_slots() -> None:
    with serving(_settings(service_max_concurrent=1, service_max_streams=1)) as base:

        async def talk() -> None:
            holder = await RawStream.open(base)
            await holder.send({"source": HTTP_SOURCE})
            await holder.send({"text": "The library opened in 1962. It"})
            assert await holder.head() == 200
            async with httpx.AsyncClient(timeout=30) as client:
                checked = await client.post(f"{base}/v1/check", json=CHECK,
                                            headers={"X-API-Key": KEY})
            assert checked.status_code == 200  # the only check slot is not the stream's
            second = await RawStream.open(base)
            await second.send({"source": HTTP_SOURCE})
            assert await second.head() == 429  # but streams have a limit of their own
            problem = json.loads(await second.body())
            assert "CONLI_SERVICE_MAX_STREAMS" in problem["detail"]
            holder.abort()

        _run(talk)


def test_a_quiet_stream_is_ended_at_the_idle_limit_and_frees_its_slot() -> None:
    settings = _settings(service_max_streams=1, service_stream_idle_seconds=0.5,
                         service_timeout_seconds=120)
    with serving(settings) as base:

        async def quiet() -> list[dict[str, Any]]:
            client = await RawStream.open(base)
            await client.send({"source": HTTP_SOURCE})
            await client.send({"text": "The library opened in 1962. It"})
            assert await client.head() == 200
            return await client.rest()  # the body never ends; the idle limit ends the answer

        lines = _run(quiet)
        assert [line["event"] for line in lines] == ["sentence", "error"]
        assert lines[-1]["status"] == 422 and "sent nothing" in lines[-1]["detail"]

        async def silent() -> int:  # not even the opening line: a problem, no slot taken
            client = await RawStream.open(base)
            return await client.head()

        assert _run(silent) == 422
        assert _next_stream(base)[-1]["event"] == "done"  # the one stream slot is free again


def test_a_client_waiting_for_a_verdict_slower_than_the_idle_limit_still_gets_it() -> None:
    settings = _settings(service_stream_idle_seconds=0.5, service_timeout_seconds=60)
    slow = scripted.backend(sleep=1.2)  # each model call takes over twice the idle limit
    with serving(settings, backend=slow) as base:

        async def one_sentence_at_a_time() -> tuple[float, list[dict[str, Any]]]:
            client = await RawStream.open(base)
            await client.send({"source": HTTP_SOURCE})
            await client.send({"text": "The library opened in 1962. It"})
            assert await client.head() == 200
            asked = time.monotonic()
            first = await client.line()  # nothing more is sent until this verdict is in
            waited = time.monotonic() - asked
            await client.send({"text": " is run by the city council."})
            await client.end()
            return waited, [first, *await client.rest()]

        waited, lines = _run(one_sentence_at_a_time)
    assert waited > 1.0 and lines[0]["latency_seconds"] > 1.0  # the check outlasted the limit
    assert [line["event"] for line in lines] == ["sentence", "sentence", "done"], lines
    assert [line["sentence"]["verdict"] for line in lines[:2]] == ["supported", "supported"]


def test_a_trickling_stream_is_cut_with_a_clear_message_and_frees_its_slot() -> None:
    # a word every 0.25 s never meets the idle limit, but is 20 characters a second: under 40
    settings = _settings(service_max_streams=1, service_stream_idle_seconds=1.0,
                         service_stream_min_rate=40.0, service_timeout_seconds=60)
    with serving(settings) as base:

        async def trickle() -> tuple[float, list[dict[str, Any]]]:
            client = await RawStream.open(base)
            await client.send({"source": HTTP_SOURCE})
            sender = asyncio.create_task(_send_every(client, 0.25, "word ", times=400))
            started = time.monotonic()
            assert await client.head() == 200
            lines = await client.rest()
            sender.cancel()
            return time.monotonic() - started, lines

        took, lines = _run(trickle)
        assert [line["event"] for line in lines] == ["error"], lines
        error = lines[0]
        assert error["status"] == 422 and "CONLI_SERVICE_STREAM_MIN_RATE" in error["detail"]
        assert "characters of the reply" in error["detail"]
        assert took < 15  # about 2 s (1 s + 20/40 of the time); the time limit is 60 s
        assert _next_stream(base)[-1]["event"] == "done"  # the one stream slot is free again


def test_a_steady_stream_outlasting_the_idle_allowance_is_not_cut() -> None:
    # a word every 0.05 s (about 100 characters a second) for 2 s: the rate asks for 40
    settings = _settings(service_stream_idle_seconds=0.5, service_stream_min_rate=40.0)
    with serving(settings) as base:

        async def steady() -> list[dict[str, Any]]:
            client = await RawStream.open(base)
            await client.send({"source": HTTP_SOURCE})
            await _send_every(client, 0.05, "word ", times=40)
            await client.send({"text": "opened in 1962."})
            await client.end()
            assert await client.head() == 200
            return await client.rest()

        lines = _run(steady)
    assert [line["event"] for line in lines] == ["sentence", "done"], lines


def test_a_stream_of_whitespace_alone_sends_nothing_and_is_cut_by_the_rate() -> None:
    """Spaces at 100 characters a second would pass a rate of 40 if they counted (issue 52.5)."""
    settings = _settings(service_max_streams=1, service_stream_idle_seconds=1.0,
                         service_stream_min_rate=40.0, service_timeout_seconds=60)
    with serving(settings) as base:

        async def spaces() -> list[dict[str, Any]]:
            client = await RawStream.open(base)
            await client.send({"source": HTTP_SOURCE})
            sender = asyncio.create_task(_send_every(client, 0.05, " " * 5, times=400))
            assert await client.head() == 200
            lines = await client.rest()
            sender.cancel()
            return lines

        lines = _run(spaces)
        assert [line["event"] for line in lines] == ["error"], lines
        assert "CONLI_SERVICE_STREAM_MIN_RATE" in lines[0]["detail"]
        assert "sent 0 characters of the reply" in lines[0]["detail"]
