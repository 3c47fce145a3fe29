"""Azure AI Language's NER answers (the analyze-text wire format), for a loopback server."""

from __future__ import annotations

from typing import Any

from conli.ner.azure_ner import MAX_CHARS_PER_DOC
from tests.support.http_fakes import Reply, Request

# surface -> (category, subcategory), as the service would label them
KNOWN = {
    "Ada Lovelace": ("Person", None),
    "London": ("Location", "GPE"),
    "1843": ("DateTime", "DateRange"),
    "three years": ("DateTime", "Duration"),
    "42": ("Quantity", "Number"),
    "$5": ("Quantity", "Currency"),
    "Microsoft": ("Organization", None),  # not among the paper's categories
    "engineer": ("PersonType", None),
}


def _entities(text: str) -> list[dict[str, Any]]:
    found = []
    for surface, (category, sub) in KNOWN.items():
        start = text.find(surface)
        while start != -1:
            entity = {"text": surface, "category": category, "offset": start,
                      "length": len(surface), "confidenceScore": 0.95}
            if sub:
                entity["subcategory"] = sub
            found.append(entity)
            start = text.find(surface, start + 1)
    return sorted(found, key=lambda e: e["offset"])


def _good(request: Request) -> Reply:
    documents = request.body["analysisInput"]["documents"]
    assert request.body["parameters"]["stringIndexType"] == "UnicodeCodePoint"
    assert len(documents) <= 5 and all(len(d["text"]) <= MAX_CHARS_PER_DOC for d in documents)
    return Reply(200, {
        "kind": "EntityRecognitionResults",
        "results": {
            "documents": [{"id": d["id"], "entities": _entities(d["text"]), "warnings": []}
                          for d in documents],
            "errors": [], "modelVersion": "2021-06-01",
        },
    })
