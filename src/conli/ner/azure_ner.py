"""Azure Text Analytics (AI Language) NER, the paper's recognizer, as a second backend.

Texts are cut into chunks of at most 5,120 characters and sent at most five per request
(the synchronous API's limits); offsets come back in code points and are shifted to index
the text given. Calls are retried like LLM calls; a call that still fails raises, and the
entity step marks that sentence ``unverified`` instead of skipping its entity level.
``azure-ai-textanalytics`` is imported only here.
"""

from __future__ import annotations

from typing import Any

from conli.backends.http_errors import error_for_status
from conli.backends.retry import call_with_retries
from conli.config import DetectionSettings
from conli.config.credentials import provider_variable
from conli.errors import (
    AuthenticationError,
    BackendError,
    BackendUnavailableError,
    BadRequestError,
    ConfigError,
    TransientBackendError,
    install_hint,
)
from conli.models import Entity
from conli.ner.categories import azure_category, validate_categories

MAX_DOCS_PER_REQUEST = 5
MAX_CHARS_PER_DOC = 5120
_BREAKS = ("\n", ". ", "! ", "? ", "; ", ", ", " ")


def _import_sdk() -> tuple[Any, Any, Any]:
    try:
        from azure.ai.textanalytics import TextAnalyticsClient
        from azure.core import exceptions
        from azure.core.credentials import AzureKeyCredential
    except ImportError as exc:
        raise BackendUnavailableError(
            f"Azure NER needs azure-ai-textanalytics: {install_hint('azure')}"
        ) from exc
    return TextAnalyticsClient, AzureKeyCredential, exceptions


def chunk_text(text: str, limit: int = MAX_CHARS_PER_DOC) -> list[tuple[int, str]]:
    """``text`` as (offset, chunk) pieces of at most ``limit`` characters, cut at breaks."""
    chunks: list[tuple[int, str]] = []
    start = 0
    while len(text) - start > limit:
        window = text[start : start + limit]
        cut = max((window.rfind(b) + len(b) for b in _BREAKS if window.rfind(b) > 0), default=0)
        cut = cut if cut > limit // 2 else limit
        chunks.append((start, window[:cut]))
        start += cut
    if start < len(text) or not chunks:
        chunks.append((start, text[start:]))
    return chunks


class AzureRecognizer:
    """Entities from Azure AI Language NER, labelled with our canonical categories."""

    name = "azure"

    def __init__(self, settings: DetectionSettings, *, language: str = "en") -> None:
        client_cls, credential_cls, self._errors = _import_sdk()
        endpoint = settings.azure_language_endpoint or provider_variable("AZURE_LANGUAGE_ENDPOINT")
        key = provider_variable("AZURE_LANGUAGE_KEY")
        if not endpoint:
            raise ConfigError(
                "Azure NER needs an endpoint: set AZURE_LANGUAGE_ENDPOINT or "
                "CONLI_AZURE_LANGUAGE_ENDPOINT"
            )
        if not key:
            raise AuthenticationError("Azure NER needs a key: set AZURE_LANGUAGE_KEY")
        self._categories = validate_categories(settings.entity_categories)
        self._language = language
        self._timeout = settings.azure_ner_timeout
        self._client = client_cls(
            endpoint,
            credential_cls(key),
            retry_total=0,  # retries live in conli.backends.retry only
            connection_timeout=self._timeout,
            read_timeout=self._timeout,
        )

    def entities(self, text: str) -> list[Entity]:
        """Entities of the selected categories; the same surface text is kept once."""
        return self.entities_many([text])[0]

    def entities_many(self, texts: list[str]) -> list[list[Entity]]:
        """Entities for several texts, packing chunks five to a request."""
        pieces = [(t, offset, chunk) for t, text in enumerate(texts)
                  for offset, chunk in chunk_text(text) if chunk.strip()]
        found: list[list[Entity]] = [[] for _ in texts]
        seen: list[set[str]] = [set() for _ in texts]
        for i in range(0, len(pieces), MAX_DOCS_PER_REQUEST):
            group = pieces[i : i + MAX_DOCS_PER_REQUEST]
            chunks = [c for _, _, c in group]
            results = call_with_retries(lambda: self._recognize(chunks),  # noqa: B023
                                        what="Azure NER call")
            for (t, offset, _), result in zip(group, results, strict=True):
                for entity in self._convert(texts[t], offset, result):
                    if entity.text not in seen[t]:
                        seen[t].add(entity.text)
                        found[t].append(entity)
        return found

    def _recognize(self, chunks: list[str]) -> list[Any]:
        """One request; SDK errors mapped onto our tree, document errors raised."""
        documents = [
            {"id": str(i), "text": chunk, "language": self._language}
            for i, chunk in enumerate(chunks)
        ]
        errors = self._errors
        try:
            results = self._client.recognize_entities(
                documents, string_index_type="UnicodeCodePoint"
            )
        except errors.HttpResponseError as exc:
            status = exc.status_code or 0
            if isinstance(exc, errors.DecodeError) or status < 400:  # a 2xx we cannot read
                message = f"azure-language sent a malformed reply: {exc}"
                raise TransientBackendError(message) from exc
            headers = dict(exc.response.headers) if exc.response is not None else {}
            raise error_for_status("azure-language", status, str(exc.message), headers) from exc
        except (errors.ServiceRequestError, errors.ServiceResponseError) as exc:
            raise TransientBackendError(f"azure-language call failed: {exc}") from exc
        except errors.AzureError as exc:
            raise BackendError(f"azure-language call failed: {exc}") from exc
        for result in results:
            if result.is_error:
                raise BadRequestError(
                    f"azure-language could not analyse a document: {result.error.message}"
                )
        return list(results)

    def _convert(self, text: str, offset: int, result: Any) -> list[Entity]:
        """Entities of one chunk, offsets shifted to ``text`` and checked against it."""
        entities = []
        for ent in result.entities:
            category = azure_category(ent.category, ent.subcategory)
            surface = ent.text.strip()
            if category not in self._categories or not surface:
                continue
            start = offset + ent.offset + (len(ent.text) - len(ent.text.lstrip()))
            if text[start : start + len(surface)] != surface:
                start = text.find(surface, max(0, start - 16))
                if start == -1:
                    continue
            label = f"{ent.category}/{ent.subcategory}" if ent.subcategory else ent.category
            entities.append(
                Entity(text=surface, label=label, category=category,
                       start=start, end=start + len(surface))
            )
        return entities

    def close(self) -> None:
        """Close the SDK's HTTP pipeline."""
        self._client.close()
