"""The drop-in client: the app's own ``openai`` client, each reply checked in process.

The wrapped clients are the real SDK's, pointed at a loopback OpenAI-compatible server
(``tests.support.proxy_fakes``); the checker is the scripted backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import openai
import pytest

from conli.config import Settings
from conli.errors import BackendUnavailableError, InputError, UnsupportedRequestError
from conli.pipeline import Checker
from conli.proxy.client import AsyncGuardedOpenAI, GuardedOpenAI
from conli.proxy.verdicts import Policy
from tests.support import scripted
from tests.support.http_fakes import FakeServer, Reply, Request, openai_chat, serve
from tests.support.proxy_fakes import (
    CONLI,
    MESSAGES,
    REPLY,
    REWRITTEN,
    SOURCE,
    _dead,
    chat_handler,
)


@pytest.fixture
def upstream() -> Iterator[FakeServer]:
    with serve(chat_handler()) as server:
        yield server


@pytest.fixture
def checker() -> Iterator[Checker]:
    with Checker(Settings(), backend=scripted.backend(concurrency=2)) as built:
        yield built


def _sync(server: FakeServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="upstream-key", max_retries=0)


def test_the_wrapped_client_checks_and_rewrites_and_keeps_conli_from_the_model(
        upstream: FakeServer, checker: Checker) -> None:
    guarded = GuardedOpenAI(_sync(upstream), checker=checker)
    reply = guarded.chat.completions.create(
        model="gpt-test", messages=MESSAGES, extra_body=CONLI,
        extra_headers={"X-Trace": "1"})
    assert reply.choices[0].message.content == REWRITTEN
    assert reply.conli["verdict"] == "hallucinated" and reply.conli["action"] == "rewritten"
    (sent,) = upstream.requests
    assert "conli" not in sent.body and sent.headers["x-trace"] == "1"
    assert sent.headers["authorization"] == "Bearer upstream-key"  # the app's own key
    assert [m.id for m in guarded.models.list()] == ["gpt-test"]  # the rest is the client's


def test_the_async_client_plain_and_streamed(upstream: FakeServer, checker: Checker) -> None:
    async def calls() -> tuple[str, list[str], dict[str, object]]:
        client = openai.AsyncOpenAI(base_url=f"{upstream.url}/v1", api_key="k", max_retries=0)
        guarded = AsyncGuardedOpenAI(client, checker=checker)
        plain = await guarded.chat.completions.create(model="m", messages=MESSAGES,
                                                      extra_body=CONLI)
        stream = await guarded.chat.completions.create(model="m", messages=MESSAGES,
                                                       extra_body=CONLI, stream=True)
        pieces, last = [], None
        async for chunk in stream:
            pieces += [c.delta.content or "" for c in chunk.choices]
            last = chunk
        await client.close()
        return plain.choices[0].message.content or "", pieces, last.conli  # type: ignore[union-attr]

    text, pieces, conli = asyncio.run(calls())
    assert text == REWRITTEN
    assert [p for p in pieces if p] == ["The library opened in 1962.",
                                        " The library is true run by a charity."]
    assert conli["action"] == "rewritten"
    assert all(r.body.get("conli") is None for r in upstream.requests)


def test_the_sync_client_streams_too_and_a_dead_checker_follows_the_policy(
        upstream: FakeServer) -> None:
    with Checker(Settings(), backend=scripted.backend()) as checker:
        with GuardedOpenAI(_sync(upstream), checker=checker).chat.completions.create(
                model="m", messages=MESSAGES, extra_body=CONLI, stream=True) as stream:
            chunks = list(stream)
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == \
            REWRITTEN
        assert chunks[-1].conli["status"] == "checked"
    with Checker(Settings(), backend=_dead()) as dead:
        with pytest.raises(BackendUnavailableError):
            GuardedOpenAI(_sync(upstream), checker=dead).chat.completions.create(
                model="m", messages=MESSAGES, extra_body=CONLI)
        passing = GuardedOpenAI(_sync(upstream), checker=dead, policy=Policy.of(
            Settings(proxy_on_check_error="pass")))
        reply = passing.chat.completions.create(model="m", messages=MESSAGES, extra_body=CONLI)
        assert reply.choices[0].message.content == REPLY
        assert reply.conli["status"] == "unchecked"


def test_what_the_client_cannot_check_is_refused_or_marked_unchecked(checker: Checker) -> None:
    def tool_call(request: Request) -> Reply:
        body = openai_chat("")
        body["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
        body["choices"][0]["finish_reason"] = "tool_calls"
        return Reply(body=body)

    with serve(tool_call) as server:
        guarded = GuardedOpenAI(_sync(server), checker=checker)
        reply = guarded.chat.completions.create(model="m", messages=MESSAGES, extra_body=CONLI)
        assert reply.conli["status"] == "unchecked" and "tool call" in reply.conli["reason"]
        assert reply.choices[0].message.tool_calls[0].function.name == "f"
        with pytest.raises(UnsupportedRequestError, match="n > 1"):
            guarded.chat.completions.create(model="m", messages=MESSAGES, extra_body=CONLI, n=2)
        with pytest.raises(InputError, match="no source"):
            guarded.chat.completions.create(model="m", messages=MESSAGES)
        assert len(server.requests) == 1  # refused before the model was asked
        by_header = guarded.chat.completions.create(
            model="m", messages=MESSAGES, extra_headers={"X-Conli-Source": SOURCE})
        assert by_header.conli["sources_from"] == "header"
        assert "x-conli-source" not in server.requests[-1].headers
