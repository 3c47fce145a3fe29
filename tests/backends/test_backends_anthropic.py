"""Anthropic backend against a loopback server speaking the Messages API wire format."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conli.agents.nli import Hypothesis
from conli.backends import CompletionRequest as ModelRequest
from conli.backends import get_backend
from conli.backends.base import Backend
from conli.config import Settings
from conli.errors import AuthenticationError, TransientBackendError
from conli.models import Judgement
from tests.support.http_fakes import (
    Reply,
    Request,
    anthropic_error,
    anthropic_message,
    claims,
    nli_answer,
    serve,
)
from tests.support.responders import nli

pytestmark = pytest.mark.integration

SOURCE = "The Riverside library opened in 1962. It lends films free of charge."
CLAIMS = ["The library opened in 1962.", "Films cost a fee to borrow."]


def _label(text: str) -> str:
    return "contradiction" if "fee" in text else "entailment"


def _good(request: Request) -> Reply:
    return Reply(200, anthropic_message(tool_input=nli_answer(claims(request.body), _label),
                                        input_tokens=40, cache_read=900, cache_write=0))


@pytest.fixture
def anthropic_at(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
    """Start a fake Messages API with a handler; return (server, backend)."""
    made: list[Backend] = []

    def start(handler: Callable[[Request], Reply], **overrides: Any) -> Any:
        context = serve(handler)
        server = context.__enter__()
        contexts.append(context)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        settings = Settings(request_timeout=overrides.pop("timeout", 5.0), **overrides)
        backend = get_backend("anthropic:claude-test", settings)
        made.append(backend)
        return server, backend, settings

    contexts: list[Any] = []
    yield start
    for backend in made:
        backend.close()
    for context in contexts:
        context.__exit__(None, None, None)


def _judge(backend: Backend, settings: Settings) -> list[Judgement]:
    hypotheses = [Hypothesis(i, text) for i, text in enumerate(CLAIMS)]
    judgements, _ = nli(backend, SOURCE, hypotheses, kind="sentence",
                                     settings=settings)
    return judgements


def test_request_uses_forced_tool_and_caches_static_prompt_and_source(anthropic_at):
    server, backend, settings = anthropic_at(_good)
    judgements, calls = nli(
        backend, SOURCE, [Hypothesis(i, t) for i, t in enumerate(CLAIMS)],
        kind="sentence", settings=settings)
    assert [j.verdict for j in judgements] == ["supported", "hallucinated"]
    assert len(server.requests) == 1  # both hypotheses in one call (hosted batch size)
    request = server.requests[0]
    assert request.path == "/v1/messages"
    auth = request.headers.get("x-api-key") or request.headers.get("authorization", "")
    assert auth.endswith("sk-ant-test")  # x-api-key (SDK 0.x/1.x) or Bearer (2.x)
    assert "anthropic-version" in request.headers
    body = request.body
    assert body["tool_choice"] == {"type": "tool", "name": "answer"}
    schema = body["tools"][0]["input_schema"]
    assert schema["type"] == "object" and "$defs" not in json.dumps(schema)
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    last = body["messages"][-1]["content"]
    assert last[0]["text"].endswith("</source>") and last[0]["cache_control"]["type"] == "ephemeral"
    assert "<claim" in last[1]["text"] and "cache_control" not in last[1]
    usage = calls[0].usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens) == (940, 900, 20)


def test_429_waits_for_retry_after_then_succeeds(anthropic_at):
    def handler(request: Request) -> Reply:
        if len(server_box[0].requests) == 1:
            return Reply(429, anthropic_error("rate_limit_error", "slow down"),
                         {"retry-after": "1"})
        return _good(request)

    server_box: list[Any] = []
    server, backend, settings = anthropic_at(handler)
    server_box.append(server)
    judgements = _judge(backend, settings)
    assert [j.verdict for j in judgements] == ["supported", "hallucinated"]
    assert len(server.requests) == 2
    assert server.requests[1].at - server.requests[0].at >= 0.95  # Retry-After honoured


def test_500_then_success_is_retried(anthropic_at):
    statuses = iter([500, 529])

    def handler(request: Request) -> Reply:
        status = next(statuses, 200)
        if status != 200:
            return Reply(status, anthropic_error("api_error", "boom"))
        return _good(request)

    server, backend, settings = anthropic_at(handler)
    assert [j.verdict for j in _judge(backend, settings)] == ["supported", "hallucinated"]
    assert len(server.requests) == 3


def test_slow_response_past_timeout_is_retried(anthropic_at):
    def handler(request: Request) -> Reply:
        reply = _good(request)
        if len(server.requests) == 1:
            reply.delay = 2.0
        return reply

    server, backend, settings = anthropic_at(handler, timeout=0.5)
    assert [j.verdict for j in _judge(backend, settings)] == ["supported", "hallucinated"]
    assert len(server.requests) == 2


def test_malformed_http_body_is_retried_then_fails_the_check(anthropic_at):
    server, backend, settings = anthropic_at(lambda r: Reply(200, b'{"id": "msg_01", "cont'))
    with pytest.raises(TransientBackendError, match="unreadable"):
        _judge(backend, settings)  # a backend that never answers is an error, never supported
    assert len(server.requests) == 4  # every attempt of retry.py, then give up


def test_invalid_answer_gets_one_reask_then_unverified(anthropic_at):
    bad = {"judgements": [{"id": 0, "label": "maybe"}]}
    server, backend, settings = anthropic_at(
        lambda r: Reply(200, anthropic_message(tool_input=bad)))
    judgements = _judge(backend, settings)
    assert [j.verdict for j in judgements] == ["unverified", "unverified"]
    assert len(server.requests) == 2  # the call and one re-ask carrying the error
    reask = server.requests[1].body["messages"][-1]["content"]
    assert "could not be used" in json.dumps(reask)


def test_skipped_hypothesis_is_asked_again_then_unverified(anthropic_at):
    def handler(request: Request) -> Reply:
        answer = nli_answer(claims(request.body), _label, skip=lambda t: "fee" in t)
        return Reply(200, anthropic_message(tool_input=answer))

    server, backend, settings = anthropic_at(handler)
    judgements = _judge(backend, settings)
    assert [j.verdict for j in judgements] == ["supported", "unverified"]
    # first call; follow-up for the skipped one; its re-ask after "no judgements given"
    assert len(server.requests) == 3
    assert claims(server.requests[1].body) == ["Films cost a fee to borrow."]


def test_auth_error_fails_fast_without_retry(anthropic_at):
    server, backend, settings = anthropic_at(
        lambda r: Reply(401, anthropic_error("authentication_error", "invalid x-api-key")))
    with pytest.raises(AuthenticationError, match="API key"):
        backend.complete(ModelRequest([{"role": "user", "content": "hi"}], max_tokens=8))
    with pytest.raises(AuthenticationError):
        _judge(backend, settings)
    assert len(server.requests) == 2  # one direct call, one judged batch: no retries at all
