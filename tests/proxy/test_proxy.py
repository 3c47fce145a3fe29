"""The OpenAI-compatible guard (``conli serve --upstream``) driven by the real clients.

The ``openai`` SDK (sync, async, streaming) and LangChain's ``ChatOpenAI`` talk to the proxy
over loopback HTTP with nothing changed but ``base_url`` and the sources in ``extra_body``;
the proxy asks a loopback OpenAI-compatible upstream (``tests.support.proxy_fakes``) and checks
each reply on the scripted checker. Refusals, upstream failures and a dead checker come
back in OpenAI's error shape, which the SDK raises as its own exceptions.
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import quote

import httpx
import openai
import pytest

from conli.backends.fake import ScriptedBackend
from tests.support import scripted
from tests.support.http_fakes import Reply, Request, openai_error
from tests.support.proxy_fakes import (
    CONLI,
    MESSAGES,
    QUESTION,
    REPLY,
    REWRITTEN,
    SOURCE,
    _dead,
    chat_handler,
    proxied,
    sse_events,
)
from tests.support.service import KEY

pytest.importorskip("fastapi")


def _client(base_url: str, **kwargs: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0, **kwargs)  # type: ignore[arg-type]


def test_an_unmodified_sdk_call_gets_the_rewrite_with_the_result_on_it() -> None:
    with proxied() as proxy:
        raw = _client(proxy.base_url).chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=MESSAGES, extra_body=CONLI)
        reply = raw.parse()
        assert reply.choices[0].message.content == REWRITTEN
        assert reply.choices[0].finish_reason == "stop" and reply.model == "gpt-test"
        conli = reply.conli  # type: ignore[attr-defined]  # an extra field the SDK keeps
        assert (conli["status"], conli["verdict"], conli["action"]) == (
            "checked", "hallucinated", "rewritten")
        assert conli["original"] == REPLY and conli["sources_from"] == "conli"
        assert [s["verdict"] for s in conli["result"]["sentences"]] == ["supported",
                                                                         "hallucinated"]
        assert raw.headers["x-conli-verdict"] == "hallucinated"
        assert raw.headers["x-conli-supported-share"] == "0.5"
        assert reply.usage is not None and reply.usage.completion_tokens == 12  # the upstream's
        (asked,) = proxy.chats()  # the upstream saw the chat, never conli's object or key
        assert asked.body["messages"] == MESSAGES and "conli" not in asked.body
        assert asked.body["max_tokens"] == 1024
        assert KEY not in asked.headers.get("authorization", "")


def test_a_supported_reply_goes_out_as_written() -> None:
    written = "The library opened in 1962."
    with proxied(chat_handler(written)) as proxy:
        raw = _client(proxy.base_url).chat.completions.with_raw_response.create(
            model="m", messages=MESSAGES, extra_body=CONLI)
        reply = raw.parse()
        assert reply.choices[0].message.content == written
        assert reply.conli["action"] == "as_written"  # type: ignore[attr-defined]
        assert reply.conli["original"] is None  # type: ignore[attr-defined]
        assert raw.headers["x-conli-verdict"] == "supported"


def test_async_and_streamed_calls_release_checked_sentences_then_the_result() -> None:
    async def calls(base_url: str) -> tuple[str, list[str], object, object]:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        plain = await client.chat.completions.create(model="m", messages=MESSAGES,
                                                     extra_body=CONLI)
        stream = await client.chat.completions.create(
            model="m", messages=MESSAGES, extra_body=CONLI, stream=True,
            stream_options={"include_usage": True})
        pieces, last = [], None
        finish = None
        async for chunk in stream:
            if chunk.choices:
                pieces += [chunk.choices[0].delta.content or ""]
                finish = chunk.choices[0].finish_reason or finish
            last = chunk
        await client.close()
        return plain.choices[0].message.content or "", pieces, last, finish

    with proxied() as proxy:
        text, pieces, last, finish = asyncio.run(calls(proxy.base_url))
    assert text == REWRITTEN
    assert "".join(pieces) == REWRITTEN and finish == "stop"
    assert [p for p in pieces if p] == ["The library opened in 1962.",
                                        " The library is true run by a charity."]
    conli = last.conli  # type: ignore[attr-defined]
    assert (conli["verdict"], conli["action"]) == ("hallucinated", "rewritten")
    assert conli["result"]["mitigation"]["changes"][0]["after"] == \
        "The library is true run by a charity."
    assert last.usage.total_tokens == 42  # type: ignore[attr-defined]  # include_usage


def test_langchain_chat_openai_through_the_proxy_plain_and_streamed() -> None:
    from langchain_openai import ChatOpenAI

    with proxied() as proxy:
        chat = ChatOpenAI(model="gpt-4o-mini", base_url=proxy.base_url, api_key=KEY,
                          max_retries=0, extra_body=CONLI, include_response_headers=True)
        message = chat.invoke(QUESTION)
        assert message.content == REWRITTEN
        assert message.response_metadata["headers"]["x-conli-verdict"] == "hallucinated"
        assert "".join(str(chunk.content) for chunk in chat.stream(QUESTION)) == REWRITTEN
        assert all("conli" not in c.body for c in proxy.chats())


def test_on_flag_block_sends_the_refusal_and_a_laxer_choice_is_refused() -> None:
    with proxied(proxy_refusal="No grounded answer.") as proxy:
        client = _client(proxy.base_url)
        blocked = client.chat.completions.create(
            model="m", messages=MESSAGES, extra_body={"conli": {"sources": SOURCE,
                                                                "on_flag": "block"}})
        assert blocked.choices[0].message.content == "No grounded answer."
        assert blocked.choices[0].finish_reason == "content_filter"
        assert blocked.conli["action"] == "blocked"  # type: ignore[attr-defined]
        with pytest.raises(openai.BadRequestError, match="laxer") as refused:
            client.chat.completions.create(model="m", messages=MESSAGES, extra_body={
                "conli": {"sources": SOURCE, "on_flag": "annotate"}})
        assert refused.value.body["param"] == "conli.on_flag"  # type: ignore[index]
        streamed = client.chat.completions.create(
            model="m", messages=MESSAGES, stream=True,
            extra_body={"conli": {"sources": SOURCE, "on_flag": "block"}})
        chunks = list(streamed)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "The library opened in 1962.\n\nNo grounded answer."  # FALSE never left
        assert chunks[-1].conli["action"] == "blocked"  # type: ignore[attr-defined]


def test_annotate_sends_the_reply_as_written_with_its_verdicts() -> None:
    with proxied(proxy_on_flag="annotate") as proxy:
        raw = _client(proxy.base_url).chat.completions.with_raw_response.create(
            model="m", messages=MESSAGES, extra_body=CONLI)
        reply = raw.parse()
        assert reply.choices[0].message.content == REPLY
        assert raw.headers["x-conli-verdict"] == "hallucinated"
        assert reply.conli["result"]["sentences"][1]["reasons"]  # type: ignore[attr-defined]


def test_sources_come_from_tool_messages_the_header_and_the_system_where_allowed() -> None:
    tool_turn = [*MESSAGES,
                 {"role": "assistant", "content": None, "tool_calls": [{
                     "id": "call_1", "type": "function",
                     "function": {"name": "search", "arguments": "{\"q\": \"library\"}"}}]},
                 {"role": "tool", "tool_call_id": "call_1", "content": SOURCE}]
    with proxied() as proxy:
        client = _client(proxy.base_url)
        by_tool = client.chat.completions.create(model="m", messages=tool_turn)
        assert by_tool.conli["sources_from"] == "tool"  # type: ignore[attr-defined]
        assert by_tool.choices[0].message.content == REWRITTEN
        # the tool turn reached the upstream as text: the backend contract carries no tools
        assert proxy.chats()[-1].body["messages"][1:] == [
            {"role": "assistant", "content": "[tool call search: {\"q\": \"library\"}]"},
            {"role": "user", "content": f"[tool result call_1]\n{SOURCE}"}]
        header = client.chat.completions.create(
            model="m", messages=MESSAGES, extra_headers={"X-Conli-Source": quote(SOURCE)})
        assert header.conli["sources_from"] == "header"  # type: ignore[attr-defined]
        system = [{"role": "system", "content": SOURCE}, *MESSAGES]
        with pytest.raises(openai.UnprocessableEntityError, match="no source"):
            client.chat.completions.create(model="m", messages=system)
    with proxied(proxy_system_as_source=True) as proxy:
        allowed = _client(proxy.base_url).chat.completions.create(model="m", messages=system)
        assert allowed.conli["sources_from"] == "system"  # type: ignore[attr-defined]


def test_no_source_is_refused_before_the_upstream_or_passed_marked_unchecked() -> None:
    with proxied() as proxy:
        with pytest.raises(openai.UnprocessableEntityError, match="no source"):
            _client(proxy.base_url).chat.completions.create(model="m", messages=MESSAGES)
        assert proxy.chats() == []  # the upstream was never asked
    with proxied(proxy_no_source="pass") as proxy:
        raw = _client(proxy.base_url).chat.completions.with_raw_response.create(
            model="m", messages=MESSAGES)
        assert raw.parse().choices[0].message.content == REPLY
        assert raw.headers["x-conli-verdict"] == "unchecked"
        assert "x-conli-supported-share" not in raw.headers
        assert raw.parse().conli["status"] == "unchecked"  # type: ignore[attr-defined]


def test_a_dead_checker_never_lets_a_reply_out_marked_checked() -> None:
    with proxied(checker=_dead()) as proxy:
        client = _client(proxy.base_url)
        with pytest.raises(openai.InternalServerError, match="could not be checked") as plain:
            client.chat.completions.create(model="m", messages=MESSAGES, extra_body=CONLI)
        assert plain.value.status_code == 503
        assert plain.value.body["type"] == "conli_check_failed"  # type: ignore[index]
        assert REPLY not in plain.value.response.text
    with proxied(checker=_dead(after=1)) as proxy:  # the first sentence checks, then it dies
        pieces = []
        with pytest.raises(openai.APIError, match="could not be checked"):
            for chunk in _client(proxy.base_url).chat.completions.create(
                    model="m", messages=MESSAGES, extra_body=CONLI, stream=True):
                pieces += [c.delta.content or "" for c in chunk.choices]
        assert "".join(pieces) == "The library opened in 1962."  # checked, and nothing else
    with proxied(checker=_dead(), proxy_on_check_error="pass") as proxy:
        raw = _client(proxy.base_url).chat.completions.with_raw_response.create(
            model="m", messages=MESSAGES, extra_body=CONLI)
        assert raw.headers["x-conli-verdict"] == "unchecked"
        assert raw.parse().choices[0].message.content == REPLY
        assert raw.parse().conli["reason"].startswith("the check failed")  # type: ignore[attr-defined]
        chunks = list(_client(proxy.base_url).chat.completions.create(
            model="m", messages=MESSAGES, extra_body=CONLI, stream=True))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == REPLY
        assert chunks[-1].conli["status"] == "unchecked"  # type: ignore[attr-defined]


def test_upstream_errors_come_back_in_openai_shape_with_their_meaning() -> None:
    limited = chat_handler(status=429, body=openai_error(429, "slow down", "rate_limit_exceeded"),
                           headers={"retry-after": "7"})
    with proxied(limited) as proxy, pytest.raises(openai.RateLimitError, match="slow down") as err:
        _client(proxy.base_url).chat.completions.create(model="m", messages=MESSAGES,
                                                        extra_body=CONLI)
    assert err.value.response.headers["retry-after"] == "7"
    assert err.value.body["type"] == "rate_limit_error"  # type: ignore[index]
    refused = chat_handler(status=400, body=openai_error(400, "context too long"))
    with proxied(refused) as proxy, pytest.raises(openai.BadRequestError, match="context too"):
        _client(proxy.base_url).chat.completions.create(model="m", messages=MESSAGES,
                                                        extra_body=CONLI)
    keyless = chat_handler(status=401, body=openai_error(401, "Incorrect API key sk-op***"))
    with proxied(keyless) as proxy:
        with pytest.raises(openai.APIStatusError) as bad_key:  # the operator's key, not ours
            _client(proxy.base_url).chat.completions.create(model="m", messages=MESSAGES,
                                                            extra_body=CONLI, stream=True)
        assert bad_key.value.status_code == 502 and "sk-op" not in bad_key.value.message
    events = sse_events(REPLY)
    crash = b'data: {"error": {"message": "the model crashed", "type": "server_error"}}\n\n'
    broken = [*events[:9], crash]  # the stream breaks after "... The library is FALSE"

    def breaking(request: Request) -> Reply:
        return Reply(chunks=broken, every=0.05)

    with proxied(breaking) as proxy:
        pieces = []
        with pytest.raises(openai.APIError, match="the model crashed") as midway:
            for chunk in _client(proxy.base_url).chat.completions.create(
                    model="m", messages=MESSAGES, extra_body=CONLI, stream=True):
                pieces += [c.delta.content or "" for c in chunk.choices]
        assert midway.value.body["type"] == "upstream_error"  # type: ignore[index]
        assert "FALSE" not in "".join(pieces)  # what had not been checked never went out


@pytest.mark.parametrize(("field", "value"), [("n", 2), ("stop", ["\n"]), ("top_p", 0.5),
                                              ("tools", [{"type": "function", "function": {
                                                  "name": "f", "parameters": {}}}])])
def test_what_cannot_be_carried_is_refused_by_name(field: str, value: object) -> None:
    with proxied() as proxy:
        with pytest.raises(openai.BadRequestError, match=field) as refused:
            _client(proxy.base_url).chat.completions.create(
                model="m", messages=MESSAGES, extra_body={**CONLI, field: value})
        assert refused.value.body["param"] == field  # type: ignore[index]
        assert proxy.chats() == []


def test_keys_the_proxys_own_as_bearer_and_a_clients_forwarded_only_when_set() -> None:
    with proxied() as proxy:
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=proxy.base_url, api_key="wrong", max_retries=0).models.list()
        assert [m.id for m in _client(proxy.base_url).models.list()] == ["gpt-test"]
        too_big = httpx.post(f"{proxy.base_url}/chat/completions", content=b"x" * 1_000_001,
                             headers={"Authorization": f"Bearer {KEY}"})
        assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "too-large"
    with proxied(proxy_forward_client_key=True) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="the-clients-upstream-key",
                               default_headers={"X-API-Key": KEY}, max_retries=0)
        client.chat.completions.create(model="m", messages=MESSAGES, extra_body=CONLI)
        assert proxy.chats()[-1].headers["authorization"] == "Bearer the-clients-upstream-key"
        with pytest.raises(openai.AuthenticationError):  # the bearer is no longer the proxy's key
            _client(proxy.base_url).chat.completions.create(model="m", messages=MESSAGES,
                                                            extra_body=CONLI)


def test_a_client_that_leaves_a_stream_stops_the_upstream_and_the_checks() -> None:
    reply = " ".join(["The library opened in 1962.", "The city council runs the library."] * 3)
    events = sse_events(reply)

    def slow(request: Request) -> Reply:  # a model writing a word every 0.1 s
        return Reply(chunks=events, every=0.1)

    checker = scripted.backend(sleep=0.4, concurrency=1)
    with proxied(slow, checker=checker, service_max_concurrent=1) as proxy:
        client = _client(proxy.base_url)
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                                extra_body=CONLI)
        first = next(c for c in stream if c.choices and c.choices[0].delta.content)
        assert first.choices[0].delta.content == "The library opened in 1962."
        stream.close()
        time.sleep(1.5)
        (asked,) = proxy.chats()
        assert asked.body["stream"] is True  # the reply was checked while it was written
        assert asked.client_left and asked.chunks_sent < len(events), "the upstream wrote on"
        calls = len(checker.calls)
        assert calls < 5, "the checks went on after the client left"
        time.sleep(1.0)
        assert len(checker.calls) == calls
        proxy.upstream.handler = chat_handler()
        answer = client.chat.completions.create(model="m", messages=MESSAGES, extra_body=CONLI)
        assert answer.conli["status"] == "checked"  # type: ignore[attr-defined]  # slot freed


@pytest.mark.model
def test_the_embedded_model_as_upstream_and_checker() -> None:
    """The embedded model answers and checks (one model loaded for both); slow."""
    from conli.backends import get_backend
    from conli.config import Settings
    from conli.proxy.app import proxy_mount
    from tests.support.service import serving

    settings = Settings(service_api_keys=[KEY], llm="local", proxy_upstream="local",
                        service_timeout_seconds=900)
    backend = get_backend("local", settings)
    with serving(settings, backend=backend, mount=proxy_mount(settings)) as base:
        client = _client(f"{base}/v1", timeout=600)
        reply = client.chat.completions.create(
            model="local", messages=MESSAGES, max_tokens=60, temperature=0, extra_body=CONLI)
        conli = reply.conli  # type: ignore[attr-defined]
        assert conli["status"] == "checked" and conli["verdict"] in (
            "supported", "hallucinated", "unverified")
        assert reply.choices[0].message.content and reply.model == backend.model
        text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="local", messages=MESSAGES, max_tokens=60, temperature=0, extra_body=CONLI,
            stream=True) if c.choices)
        assert text.strip()


def test_a_bad_conli_object_or_content_is_refused_before_the_upstream() -> None:
    with proxied() as proxy:
        client = _client(proxy.base_url)
        with pytest.raises(openai.UnprocessableEntityError, match="'llm' cannot be set"):
            client.chat.completions.create(model="m", messages=MESSAGES, extra_body={
                "conli": {"sources": SOURCE, "llm": "openai:gpt-4o"}})
        with pytest.raises(openai.UnprocessableEntityError, match="'mitigate' cannot be set"):
            client.chat.completions.create(model="m", messages=MESSAGES, extra_body={
                "conli": {"sources": SOURCE, "mitigate": True}})  # an option, not the proxy's
        with pytest.raises(openai.UnprocessableEntityError, match="nosuch"):
            client.chat.completions.create(model="m", messages=MESSAGES, extra_body={
                "conli": {"sources": SOURCE, "detector": "nosuch"}})
        with pytest.raises(openai.BadRequestError, match="image_url part"):
            client.chat.completions.create(model="m", extra_body=CONLI, messages=[
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])
        with pytest.raises(openai.UnprocessableEntityError, match="NUL"):
            client.chat.completions.create(model="m", messages=MESSAGES, extra_body={
                "conli": {"sources": "The library\x00 opened in 1962."}})
        assert proxy.chats() == []


def test_a_rewrite_that_fails_sends_the_refusal_never_the_flagged_sentence() -> None:
    answer = scripted.responder()

    def no_editor(messages: list) -> str:  # type: ignore[type-arg]
        return "not JSON" if "You are an editor" in messages[0]["content"] else answer(messages)

    checker = ScriptedBackend(responder=no_editor, judges_batches=True, max_concurrency=2)
    with proxied(checker=checker, proxy_refusal="No grounded answer.") as proxy:
        client = _client(proxy.base_url)
        plain = client.chat.completions.create(model="m", messages=MESSAGES, extra_body=CONLI)
        assert plain.choices[0].message.content == "No grounded answer."
        assert plain.conli["action"] == "blocked"  # type: ignore[attr-defined]
        assert "rewrite did not complete (failed" in plain.conli["reason"]  # type: ignore[attr-defined]
        chunks = list(client.chat.completions.create(model="m", messages=MESSAGES,
                                                     extra_body=CONLI, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "The library opened in 1962.\n\nNo grounded answer."
        assert chunks[-1].conli["result"]["mitigation"]["status"] == "failed"  # type: ignore[attr-defined]


def test_serve_upstream_builds_the_proxy_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """``conli serve --upstream``: a spec that cannot be used stops it before it binds."""
    import logging.config

    from conli.cli.app import main

    monkeypatch.setattr(logging.config, "dictConfig", lambda _config: None)  # keep pytest's
    checker = ["--llm", "vllm:http://127.0.0.1:9/v1#m", "--detector", "cot"]
    assert main(["serve", "--open", *checker, "--upstream", "nosuch:model"]) == 2
    monkeypatch.setenv("CONLI_PROXY_FORWARD_CLIENT_KEY", "true")
    assert main(["serve", "--open", *checker, "--upstream", "anthropic:claude-x"]) == 2
