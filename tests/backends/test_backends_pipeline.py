"""The whole Checker over hosted backends on loopback: Anthropic for the model, Azure NER,
and plain OpenAI; the provider is switched by the spec string alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conli.backends import CompletionRequest as ModelRequest
from conli.backends import get_backend
from conli.config import Settings
from conli.errors import BadRequestError
from conli.ner.azure_ner import AzureRecognizer
from conli.pipeline import Checker
from tests.support.azure_language import _good as azure_language
from tests.support.http_fakes import (
    Reply,
    Request,
    anthropic_error,
    anthropic_message,
    openai_chat,
    openai_error,
    serve,
)
from tests.support.responders import rule_responder

pytestmark = pytest.mark.integration

SOURCE = "Ada Lovelace lived in London. In 1843 she published notes on the Analytical Engine."
RESPONSE = "Ada Lovelace lived in Paris. In 1843 she published notes on the engine."


def _as_messages(body: dict[str, Any]) -> list[dict[str, str]]:
    """The Messages API request back as plain chat messages, for the rule responder."""
    def text(content: Any) -> str:
        return content if isinstance(content, str) else "".join(b["text"] for b in content)

    system = [{"role": "system", "content": text(body["system"])}] if "system" in body else []
    return system + [{"role": m["role"], "content": text(m["content"])} for m in body["messages"]]


def test_checker_over_anthropic_and_azure_ner(monkeypatch):
    responder = rule_responder(bad=("Paris",))
    stormed: list[bool] = []

    def model(request: Request) -> Reply:
        if not stormed:  # one storm cloud: the first call is refused once, then retried
            stormed.append(True)
            return Reply(429, anthropic_error("rate_limit_error", "busy"), {"retry-after": "0"})
        answer = json.loads(responder(_as_messages(request.body)))
        return Reply(200, anthropic_message(tool_input=answer, cache_read=700))

    with serve(model) as model_server, serve(azure_language) as language:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model_server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        monkeypatch.setenv("AZURE_LANGUAGE_KEY", "k")
        settings = Settings(llm="anthropic:claude-test", ner="azure",
                            azure_language_endpoint=language.url, mitigate=False)
        checker = Checker(settings)
        try:
            assert isinstance(checker.deps.ner, AzureRecognizer)
            result = checker.check(SOURCE, RESPONSE)
        finally:
            checker.close()

    verdicts = [s.verdict for s in result.sentences]
    assert verdicts == ["hallucinated", "supported"]
    assert result.backend == "anthropic" and result.model == "claude-test"
    # the second sentence passed; its entities are Azure's (1843 is stated, so it needs no
    # entity NLI call; CONLI_ENTITY_RECHECK=all re-checks stated ones too)
    assert [e.text for e in result.sentences[1].entities] == ["1843"]
    assert result.usage.cached_tokens == 700 * result.usage.calls
    assert len(model_server.requests) == result.usage.calls + 1  # the one 429, retried
    assert language.requests  # Text Analytics was asked


def test_openai_spec_wire_format_and_quota_error(monkeypatch):
    def handler(request: Request) -> Reply:
        if request.body["messages"][-1]["content"] == "quota?":
            return Reply(429, openai_error(429, "You exceeded your current quota",
                                           code="insufficient_quota"))
        return Reply(200, openai_chat('{"ok": true}', prompt=10, cached=0, completion=3))

    with serve(handler) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        backend = get_backend("openai:gpt-4o-mini", Settings())
        try:
            completion = backend.complete(ModelRequest(
                [{"role": "user", "content": "hi"}], max_tokens=7, json_schema={"type": "object"}))
            with pytest.raises(BadRequestError, match="no quota"):
                backend.complete(ModelRequest([{"role": "user", "content": "quota?"}],
                                              max_tokens=7))
        finally:
            backend.close()
    assert completion.text == '{"ok": true}' and completion.usage.prompt_tokens == 10
    first = server.requests[0]
    assert first.path == "/v1/chat/completions"
    assert first.headers["authorization"] == "Bearer sk-test"
    assert first.body["model"] == "gpt-4o-mini" and first.body["max_completion_tokens"] == 7
    assert len(server.requests) == 2  # the quota error was not retried
