"""The grounded judge: the score from the verdicts, and reasoning that may not invent text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conli.agents.grounded_judge import check_quotes, grounded_score
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.models import Entity, Judgement, SentenceResult
from conli.pipeline import Checker
from tests.conftest import rule_responder


def sentence(i: int, verdict: str, label: str | None = None, *, entity: bool = False,
             checked: bool = True) -> SentenceResult:
    judgements = []
    if label is not None:
        tagged = Entity(text="x", label="GPE", category="Location", start=0, end=1)
        judgements = [Judgement(detector="entity_nli" if entity else "sentence_nli",
                                hypothesis="h", verdict=verdict, label=label,  # type: ignore[arg-type]
                                entity=tagged if entity else None)]
    return SentenceResult(index=i, text=f"Sentence {i} says something.", start=0, end=1,
                          checked=checked, verdict=verdict if checked else None,  # type: ignore[arg-type]
                          judgements=judgements, reasons=["r"] if verdict != "supported" else [])


@pytest.mark.parametrize(("verdicts", "score"), [
    ([("supported", None)] * 5, 5),
    ([("hallucinated", "neutral", True)] + [("supported", None)] * 4, 4),  # one minor detail
    ([("hallucinated", "neutral", True)] * 2 + [("supported", None)] * 3, 3),
    ([("hallucinated", "contradiction")] + [("supported", None)] * 4, 2),
    ([("hallucinated", "neutral")] * 3 + [("supported", None)] * 2, 2),  # 0.45 by weight
    ([("hallucinated", "contradiction")] * 3 + [("supported", None)] * 2, 1),  # 0.6
    ([("hallucinated", "neutral")] * 5, 1),
    ([("unverified", None)] * 5, 1),  # never fail open: unchecked counts as unsupported
])
def test_the_score_follows_the_rubric_from_the_weighted_findings(
    verdicts: list[Any], score: int
) -> None:
    sentences = [sentence(i, v[0], v[1], entity=len(v) > 2) for i, v in enumerate(verdicts)]
    assert grounded_score(sentences)[0] == score


def test_headings_do_not_count_and_the_share_is_weighted() -> None:
    sentences = [sentence(0, "hallucinated", "contradiction"), sentence(1, "supported"),
                 sentence(2, "supported", checked=False)]
    score, share, findings = grounded_score(sentences)
    assert (score, share) == (2, 0.5) and [f.severity for f in findings] == ["contradiction"]


def test_quotes_must_be_in_the_judged_text() -> None:
    text = "The pool cost 2.4 million dollars. It opened in June."
    check_quotes('The text says "the pool cost 2.4 million dollars", which holds.', text)
    with pytest.raises(ValueError, match="old pool closed"):
        check_quotes('It claims "the old pool closed in 2019" without support.', text)


def _checker(respond: Any, **settings: Any) -> Checker:
    return Checker(Settings(judge_mode="grounded", entity_level=False, **settings),
                   backend=ScriptedBackend(responder=respond))


def test_the_grounded_judge_scores_from_verdicts_and_checks_its_reasoning() -> None:
    nli = rule_responder(bad=("charity",))
    asked: list[str] = []

    def respond(messages: list[Any]) -> str:
        if "You write the reasoning" in messages[0]["content"]:
            asked.append(messages[-1]["content"])
            if len(asked) == 1:  # first try invents a quote: re-asked
                return json.dumps({"reasoning": 'It says "the old pool closed in 2019".'})
            return json.dumps({"reasoning": 'The text says "It is run by a charity." wrongly.'})
        return nli(messages)

    result = _checker(respond, mitigate=False).check(
        "The library opened in 1962. The city council runs it.",
        "The library opened in 1962. It is run by a charity.")
    judged = result.judge_refined
    assert judged is not None and judged.mode == "grounded"
    assert judged.score == 2 and judged.reasoning_status == "checked"  # 1 of 2 unsupported
    assert [f.severity for f in judged.findings] == ["unsupported"]
    assert len(asked) == 2 and "Score: 2 of 5" in asked[0]


def test_reasoning_that_keeps_inventing_is_dropped_but_the_score_stands() -> None:
    nli = rule_responder()

    def respond(messages: list[Any]) -> str:
        if "You write the reasoning" in messages[0]["content"]:
            return json.dumps({"reasoning": 'It says "a claim nowhere in the text".'})
        return nli(messages)

    judged = _checker(respond, mitigate=False).check(
        "The library opened in 1962.", "The library opened in 1962.").judge_refined
    assert judged is not None and judged.score == 5
    assert judged.reasoning == "" and judged.reasoning_status == "dropped"


def test_the_rubric_judge_keeps_its_score_when_its_reasoning_invents_a_quote() -> None:
    nli = rule_responder()

    def respond(messages: list[Any]) -> str:
        if "You grade how faithful" in messages[0]["content"]:
            return json.dumps({"reasoning": 'It mentions "an old pool closed in 2019".',
                               "score": 4})
        return nli(messages)

    checker = Checker(Settings(judge_mode="rubric", entity_level=False, mitigate=False),
                      backend=ScriptedBackend(responder=respond))
    judged = checker.check("The library opened in 1962.", "The library opened in 1962.")
    assert judged.judge_refined is not None and judged.judge_refined.score == 4
    assert judged.judge_refined.reasoning_status == "dropped"


def test_judge_mode_front_doors_use_the_configured_judge(tmp_path: Any) -> None:
    from conli.batch import make_worker
    from conli.frontdoor import judge_only
    from conli.inputs import check_input

    nli = rule_responder(bad=("charity",))

    def respond(messages: list[Any]) -> str:
        if "You write the reasoning" in messages[0]["content"]:
            return json.dumps({"reasoning": 'The text says "It is run by a charity." wrongly.'})
        if "You grade how faithful" in messages[0]["content"]:
            return json.dumps({"reasoning": "fine", "score": 5})
        return nli(messages)

    source, response = "The library opened in 1962.", "It opened in 1962. It is run by a charity."
    checked = check_input(source, response, max_source_chars=1000, max_response_chars=1000)
    checker = _checker(respond)
    graded = judge_only(checker.backend, checked, checker.settings, checker)
    assert graded.judge.mode == "grounded" and graded.judge.score == 2
    assert graded.usage.calls >= 2  # detection, then the reasoning
    rubric = judge_only(checker.backend, checked, checker.settings.model_copy(
        update={"judge_mode": "rubric"}))
    assert rubric.judge.mode == "rubric" and rubric.judge.score == 5
    worker = make_worker(checker.settings, "judge", checker.backend)
    record = worker({"id": "r1", "source": source, "response": response})
    assert record["result"]["judge"]["mode"] == "grounded"
    assert record["result"]["judge"]["score"] == 2
