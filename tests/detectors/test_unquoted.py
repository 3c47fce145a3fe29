"""``nli_unquoted`` rejudge: an entailment resting on words the source lacks is asked again."""

from __future__ import annotations

import json
from typing import Any

from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.pipeline import Checker
from tests.support.responders import REASONING, kind_of

SOURCE = "The bridge is 130 km long. It opened in 1998."
CLAIM = "The bridge is 310 km long (the source's 130 is a known typo)."


def _model(second: dict[str, str]) -> tuple[Any, list[list[Any]]]:
    """Entailment on an invented quote first; ``second`` when told the quote is absent."""
    seen: list[list[Any]] = []

    def respond(messages: list[Any]) -> str:
        if kind_of(messages) != "nli":
            return REASONING
        seen.append(messages)
        told = "is not in the source" in messages[-1]["content"]
        answer = second if told else {"evidence": "310 km is the verified figure",
                                      "reasoning": "the errata says so", "label": "entailment"}
        if '<claim id="' in messages[-1]["content"] or (told and '<claim id="' in
                                                         messages[-3]["content"]):
            return json.dumps({"judgements": [{"id": 0, **answer}]})
        return json.dumps(answer)

    return respond, seen


def _check(respond: Any, mode: str) -> Any:
    settings = Settings(detectors=["sentence_nli"], nli_unquoted=mode,  # type: ignore[arg-type]
                        mitigate=False, judge=False, word_scores="off")
    with Checker(settings, backend=ScriptedBackend(responder=respond)) as checker:
        return checker.check(SOURCE, CLAIM).sentences[0]


def test_recorded_by_default_the_label_stands() -> None:
    respond, seen = _model({})
    sentence = _check(respond, "record")
    nli = sentence.judgements[0]
    assert nli.verdict == "supported" and len(seen) == 1  # the model's label stands in NLI
    assert nli.evidence_in_source is False
    # the sentence does not: 310 is never stated, and it argues the source has a typo
    assert sentence.verdict == "hallucinated" and sentence.detector == "unstated_entities"


def test_an_entailment_on_an_absent_quote_twice_is_unverified_and_says_why() -> None:
    respond, seen = _model({"evidence": "310 km is the verified figure", "reasoning": "again",
                            "label": "entailment"})
    sentence = _check(respond, "rejudge")
    assert len(seen) == 2 and "is not in the source" in seen[1][-1]["content"]
    assert sentence.verdict == "unverified"
    assert "not in the source" in sentence.reasons[0]


def test_a_rejudged_answer_that_quotes_the_source_decides() -> None:
    respond, _ = _model({"evidence": "The bridge is 130 km long", "reasoning": "130, not 310",
                         "label": "contradiction"})
    sentence = _check(respond, "rejudge")
    assert sentence.verdict == "hallucinated"
    assert sentence.judgements[0].evidence_in_source is True


def test_an_entity_entailment_whose_quote_lacks_the_entity_is_asked_again() -> None:
    """The source's own 1962 cannot entail a 1972 it never states."""
    source = "The library opened in 1962. It has three floors."
    asked: list[str] = []

    def respond(messages: list[Any]) -> str:
        if kind_of(messages) != "nli":
            return REASONING
        content = messages[-1]["content"]
        asked.append(content)
        told = "does not contain" in content
        entity = "[" in content and "1972" in content
        label = "neutral" if told else "entailment"
        return json.dumps({"evidence": "The library opened in 1962", "reasoning": "read",
                           "label": label if entity or told else "entailment"})

    settings = Settings(detectors=["sentence_nli", "entity_nli"], nli_unquoted="rejudge",
                        mitigate=False, judge=False, word_scores="off")
    with Checker(settings, backend=ScriptedBackend(responder=respond)) as checker:
        sentence = checker.check(source, "The library opened in 1972.").sentences[0]
    assert any("does not contain '1972'" in text for text in asked)
    assert sentence.verdict == "hallucinated"
    entity = [j for j in sentence.judgements if j.entity is not None]
    assert entity and entity[0].label == "neutral"
