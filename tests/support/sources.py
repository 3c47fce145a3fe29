"""A RAG app's chunks as sources, and a model that quotes the chunk holding each claim's fact."""

from __future__ import annotations

import json
from typing import Any

from tests.support.responders import REASONING, claims_of, kind_of

CHUNKS = ["The Riverside library opened in 1962.",
          "It has three floors and a reading room.",
          "The city council runs it."]
RESPONSE = "The library has three floors. It has a rooftop cafe."
QUOTES = {"three floors": "It has three floors", "1962": "opened in 1962",
          "council": "The city council runs it"}


def respond(messages: list[Any]) -> str:
    """Entailment quoting the chunk that holds the claim's fact; neutral with no quote else."""
    if kind_of(messages) != "nli":
        return REASONING
    content = messages[-1]["content"]
    claims = claims_of(messages) or [content]
    answers = []
    for claim in claims:
        quote = next((q for key, q in QUOTES.items() if key in claim), "")
        answers.append({"evidence": quote, "reasoning": "read it",
                        "label": "entailment" if quote else "neutral"})
    if '<claim id="' not in content:
        return json.dumps(answers[0])
    return json.dumps({"judgements": [{"id": i, **a} for i, a in enumerate(answers)]})
