"""Azure OpenAI backend against a loopback server speaking the Azure OpenAI wire format."""

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
from conli.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    TransientBackendError,
)
from conli.models import Judgement
from tests.support.http_fakes import (
    Reply,
    Request,
    claims,
    nli_answer,
    openai_chat,
    openai_error,
    serve,
)
from tests.support.responders import nli

pytestmark = pytest.mark.integration

SOURCE = "The Riverside library opened in 1962. It lends films free of charge."
CLAIMS = ["The library opened in 1962.", "Films cost a fee to borrow."]
API_VERSION = "2024-10-21"


def _label(text: str) -> str:
    return "contradiction" if "fee" in text else "entailment"


def _good(request: Request) -> Reply:
    answer = json.dumps(nli_answer(claims(request.body), _label))
    return Reply(200, openai_chat(answer, prompt=1200, cached=1024, completion=60),
                 {"x-ratelimit-remaining-requests": "99"})


@pytest.fixture
def azure_at(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
    """Start a fake Azure OpenAI resource with a handler; return (server, backend, settings)."""
    opened: list[Any] = []

    def start(handler: Callable[[Request], Reply], **overrides: Any) -> Any:
        context = serve(handler)
        server = context.__enter__()
        opened.append(context)
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-test-key")
        monkeypatch.delenv("AZURE_OPENAI_AD_TOKEN", raising=False)
        settings = Settings(azure_openai_endpoint=server.url, azure_openai_api_version=API_VERSION,
                            request_timeout=overrides.pop("timeout", 5.0), **overrides)
        backend = get_backend("azure:gpt4o-deploy", settings)
        opened.append(backend)
        return server, backend, settings

    yield start
    for thing in reversed(opened):
        if hasattr(thing, "close"):
            thing.close()
        else:
            thing.__exit__(None, None, None)


def _judge(backend: Backend, settings: Settings) -> list[Judgement]:
    hypotheses = [Hypothesis(i, text) for i, text in enumerate(CLAIMS)]
    judgements, _ = nli(backend, SOURCE, hypotheses, kind="sentence",
                                     settings=settings)
    return judgements


def test_wire_format_deployment_url_key_schema_and_usage(azure_at):
    server, backend, settings = azure_at(_good)
    judgements, calls = nli(
        backend, SOURCE, [Hypothesis(i, t) for i, t in enumerate(CLAIMS)],
        kind="sentence", settings=settings)
    assert [j.verdict for j in judgements] == ["supported", "hallucinated"]
    (request,) = server.requests
    assert request.path == "/openai/deployments/gpt4o-deploy/chat/completions"
    assert request.query["api-version"] == [API_VERSION]
    assert request.headers["api-key"] == "azure-test-key"
    assert request.headers["x-stainless-retry-count"] == "0"
    assert request.body["model"] == "gpt4o-deploy" and request.body["max_tokens"] > 0
    response_format = request.body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["strict"] is False
    assert response_format["json_schema"]["schema"]["properties"]["judgements"]["maxItems"] == 2
    # the static prefix and the source come before the hypotheses
    last = request.body["messages"][-1]["content"]
    assert last.index("</source>") < last.index("<claim")
    usage = calls[0].usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens) == (1200, 1024, 60)
    assert backend.capabilities.judges_batches and backend.capabilities.logprobs == 20


def test_429_with_retry_after_is_honoured(azure_at):
    def handler(request: Request) -> Reply:
        if len(server.requests) <= 2:
            return Reply(429, openai_error(429, "Rate limit is exceeded."), {"retry-after": "1"})
        return _good(request)

    server, backend, settings = azure_at(handler)
    assert [j.verdict for j in _judge(backend, settings)] == ["supported", "hallucinated"]
    times = [r.at for r in server.requests]
    assert len(times) == 3
    assert times[1] - times[0] >= 0.95 and times[2] - times[1] >= 0.95


def test_500_then_success(azure_at):
    def handler(request: Request) -> Reply:
        if len(server.requests) == 1:
            return Reply(500, openai_error(500, "The server had an error"))
        return _good(request)

    server, backend, settings = azure_at(handler)
    assert [j.verdict for j in _judge(backend, settings)] == ["supported", "hallucinated"]
    assert len(server.requests) == 2


def test_always_slow_fails_the_check_after_bounded_retries(azure_at):
    def handler(request: Request) -> Reply:
        reply = _good(request)
        reply.delay = 1.5
        return reply

    server, backend, settings = azure_at(handler, timeout=0.3)
    with pytest.raises(TransientBackendError, match=r"did not answer within 0\.3s"):
        _judge(backend, settings)
    assert len(server.requests) == 4  # retry.py's attempts, no more (the SDK retries nothing)


def test_malformed_json_answer_reasked_then_unverified(azure_at):
    server, backend, settings = azure_at(
        lambda r: Reply(200, openai_chat('{"judgements": [{"id": 0, "label": "entail')))
    judgements = _judge(backend, settings)
    assert [j.verdict for j in judgements] == ["unverified", "unverified"]
    assert len(server.requests) == 2
    assert "could not be used" in server.requests[1].body["messages"][-1]["content"]


def test_skipped_hypothesis_followed_up(azure_at):
    def handler(request: Request) -> Reply:
        texts = claims(request.body)
        skip = len(server.requests) == 1  # the first reply forgets the second claim
        answer = nli_answer(texts, _label, skip=lambda t: skip and "fee" in t)
        return Reply(200, openai_chat(json.dumps(answer)))

    server, backend, settings = azure_at(handler)
    assert [j.verdict for j in _judge(backend, settings)] == ["supported", "hallucinated"]
    assert len(server.requests) == 2
    assert claims(server.requests[1].body) == ["Films cost a fee to borrow."]


def test_auth_error_fails_fast(azure_at):
    server, backend, settings = azure_at(
        lambda r: Reply(401, openai_error(401, "Access denied due to invalid subscription key.")))
    with pytest.raises(AuthenticationError, match="Check the API key"):
        backend.complete(ModelRequest([{"role": "user", "content": "hi"}], max_tokens=8))
    assert len(server.requests) == 1
    with pytest.raises(AuthenticationError):
        _judge(backend, settings)
    assert len(server.requests) == 2


def test_bad_request_is_not_retried(azure_at):
    server, backend, _ = azure_at(
        lambda r: Reply(400, openai_error(400, "content filter", code="content_filter")))
    with pytest.raises(BadRequestError):
        backend.complete(ModelRequest([{"role": "user", "content": "hi"}], max_tokens=8))
    assert len(server.requests) == 1


def test_missing_endpoint_and_deployment_are_config_errors(monkeypatch):
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "k")
    with pytest.raises(ConfigError, match="AZURE_OPENAI_ENDPOINT"):
        get_backend("azure:dep", Settings())
    with pytest.raises(ConfigError, match="deployment"):
        get_backend("azure:", Settings(azure_openai_endpoint="http://127.0.0.1:9"))


def test_entra_token_from_environment_is_sent_as_bearer(monkeypatch):
    with serve(_good) as server:
        monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", "entra-token")
        backend = get_backend("azure:dep", Settings(azure_openai_endpoint=server.url))
        try:
            backend.complete(ModelRequest([{"role": "user", "content": '<claim id="0">x</claim>'}],
                                          max_tokens=8))
        finally:
            backend.close()
    (request,) = server.requests
    assert request.headers["authorization"] == "Bearer entra-token"
    assert "api-key" not in request.headers
