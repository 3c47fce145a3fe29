"""A LangChain ``Document`` as a source chunk: its text, and the name a result shows for it.

RAG apps hold retrieved chunks as LangChain ``Document`` objects (``page_content``,
``metadata``, ``id``). conli reads them without importing LangChain: an object with
``page_content`` and ``metadata``, or a mapping with a ``page_content`` key (what
``Document.model_dump()`` gives, so a JSON record can carry one). The text the models read is
``page_content``; the chunk's name (``evidence[].source_name``, notes, the report) is
``metadata[key]`` when the caller names a key (``Settings.source_name_key``), else the
document's ``id``, else ``metadata["id"]``, else none. A name is never shown to a model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class DocumentLike(Protocol):
    """What conli reads of a LangChain ``Document``: its text and its metadata."""

    page_content: str
    metadata: dict[str, Any]


def is_document(item: object) -> bool:
    """Whether ``item`` is a LangChain ``Document`` (or its dumped mapping), duck-typed."""
    if isinstance(item, Mapping):
        return "page_content" in item
    return hasattr(item, "page_content") and hasattr(item, "metadata")


def document_chunk(item: object, key: str | None = None) -> tuple[object, object]:
    """``(text, name)`` of one source item; neither is validated here.

    A text is itself and unnamed; a document is its ``page_content`` and its name (None
    when it has none).
    """
    if not is_document(item):
        return item, None
    content, metadata, given_id = _fields(item)
    label = metadata.get(key) if key is not None else None
    for fallback in (given_id, metadata.get("id")):
        if label is None:
            label = fallback
    return content, label


def _fields(item: object) -> tuple[object, Mapping[str, Any], object]:
    """A document's ``page_content``, ``metadata`` (a mapping, maybe empty) and ``id``."""
    if isinstance(item, Mapping):
        content, metadata, given_id = (item.get("page_content"), item.get("metadata"),
                                       item.get("id"))
    else:
        content = getattr(item, "page_content", None)
        metadata, given_id = getattr(item, "metadata", None), getattr(item, "id", None)
    return content, metadata if isinstance(metadata, Mapping) else {}, given_id
