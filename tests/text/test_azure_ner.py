"""Azure Text Analytics NER against a loopback server speaking the analyze-text wire format."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conli.config import Settings
from conli.errors import AuthenticationError, TransientBackendError
from conli.ner import get_recognizer
from conli.ner.azure_ner import MAX_CHARS_PER_DOC, AzureRecognizer, chunk_text
from tests.support.azure_language import _good
from tests.support.http_fakes import Reply, Request, serve

pytestmark = pytest.mark.integration


def _error(status: int, code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


@pytest.fixture
def ner_at(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
    """Start a fake Language resource with a handler; return (server, recognizer)."""
    opened: list[Any] = []

    def start(handler: Callable[[Request], Reply], **overrides: Any) -> Any:
        context = serve(handler)
        server = context.__enter__()
        opened.append(context)
        monkeypatch.setenv("AZURE_LANGUAGE_KEY", "lang-key")
        settings = Settings(ner="azure", azure_language_endpoint=server.url, **overrides)
        recognizer = get_recognizer(settings, nlp=None)
        assert isinstance(recognizer, AzureRecognizer)
        return server, recognizer

    yield start
    for context in opened:
        context.__exit__(None, None, None)


def test_paper_categories_subcategories_and_offsets(ner_at):
    server, ner = ner_at(_good)
    text = "Zoë met Ada Lovelace in London in 1843; she paid $5 for 42 maps over three years " \
           "as an engineer at Microsoft."
    entities = ner.entities(text)
    assert [(e.text, e.category) for e in entities] == [
        ("Ada Lovelace", "Person"), ("London", "Location"), ("1843", "DateTime"),
        ("$5", "Quantity"), ("42", "Quantity"), ("three years", "DateTime"),
        ("engineer", "PersonType"),
    ]  # Organization is not selected
    assert all(text[e.start:e.end] == e.text for e in entities)
    assert {e.label for e in entities} >= {"DateTime/Duration", "Quantity/Currency"}
    (request,) = server.requests
    assert request.path == "/language/:analyze-text"
    assert request.headers["ocp-apim-subscription-key"] == "lang-key"


def test_long_text_is_chunked_with_offsets_into_the_whole_text(ner_at):
    server, ner = ner_at(_good)
    text = ("Filler words go here. " * 300) + "Ada Lovelace lived in London."
    assert len(text) > MAX_CHARS_PER_DOC
    entities = ner.entities(text)
    assert [e.text for e in entities] == ["Ada Lovelace", "London"]
    assert all(text[e.start:e.end] == e.text for e in entities)
    assert len(server.requests) == 1
    assert len(server.requests[0].body["analysisInput"]["documents"]) == 2


def test_many_texts_packed_five_documents_per_request(ner_at):
    server, ner = ner_at(_good)
    texts = [f"Report {i}: Ada Lovelace visited London." for i in range(7)]
    found = ner.entities_many(texts)
    assert all([e.text for e in f] == ["Ada Lovelace", "London"] for f in found)
    sizes = [len(r.body["analysisInput"]["documents"]) for r in server.requests]
    assert sizes == [5, 2]


def test_chunker_respects_the_limit_and_covers_the_text():
    text = "word " * 3000
    chunks = chunk_text(text)
    assert all(len(c) <= MAX_CHARS_PER_DOC for _, c in chunks)
    assert "".join(c for _, c in chunks) == text
    assert all(text[o:o + len(c)] == c for o, c in chunks)


def test_429_retry_after_then_500_then_success(ner_at):
    def handler(request: Request) -> Reply:
        n = len(server.requests)
        if n == 1:
            return Reply(429, _error(429, "429", "Rate limit exceeded"), {"retry-after": "1"})
        if n == 2:
            return Reply(500, _error(500, "InternalServerError", "oops"))
        return _good(request)

    server, ner = ner_at(handler)
    assert [e.text for e in ner.entities("Ada Lovelace")] == ["Ada Lovelace"]
    times = [r.at for r in server.requests]
    assert len(times) == 3 and times[1] - times[0] >= 0.95


def test_auth_error_fails_fast(ner_at):
    server, ner = ner_at(lambda r: Reply(401, _error(401, "401", "Access denied")))
    with pytest.raises(AuthenticationError, match="Check the API key"):
        ner.entities("Ada Lovelace")
    assert len(server.requests) == 1


def test_slow_and_malformed_replies_are_retried_then_raise(ner_at):
    def handler(request: Request) -> Reply:
        n = len(server.requests)
        if n == 1:
            return Reply(200, b"{\"kind\": \"EntityRecognitionRes", {})
        reply = _good(request)
        reply.delay = 2.0
        return reply

    server, ner = ner_at(handler, azure_ner_timeout=0.4)
    with pytest.raises(TransientBackendError):  # fails closed: never "no entities"
        ner.entities("Ada Lovelace")
    assert len(server.requests) == 4
