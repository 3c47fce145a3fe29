"""Streams cannot starve the service: an idle-read limit, and slots of their own (issue 32.4)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from tests.test_service import serving
from tests.test_streaming import HTTP_SOURCE, KEY, RawStream, _run, _settings

CHECK = {"source": HTTP_SOURCE, "response": "The library opened in 1962."}


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

        async def next_stream() -> list[dict[str, Any]]:
            await asyncio.sleep(0.2)
            client = await RawStream.open(base)
            await client.send({"source": HTTP_SOURCE})
            await client.send({"text": "The library opened in 1962."})
            await client.end()
            assert await client.head() == 200  # the one stream slot is free again
            return await client.rest()

        assert _run(next_stream)[-1]["event"] == "done"
