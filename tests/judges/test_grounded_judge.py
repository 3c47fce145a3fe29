"""The grounded judge: the score from the verdicts, and reasoning that may not invent text."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from conli.backends.base import CallUsage, Completion, TokenLogprob
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.judges.grounded import check_quotes, evidence, grounded_score, load_scale
from conli.judges.rubric import judge
from conli.models import Entity, Judgement, SentenceResult
from conli.pipeline import Checker
from tests.support.responders import rule_responder


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


@pytest.mark.parametrize(("verdicts", "expected"), [
    ([("supported", None)] * 5, 0.0),
    ([("hallucinated", "neutral", True)] + [("supported", None)] * 4, 0.4 / 5),  # minor detail
    ([("hallucinated", "contradiction")] + [("supported", None)] * 4, 1.0 / 5),
    ([("hallucinated", "neutral")] * 3 + [("supported", None)] * 2, 0.75 * 3 / 5),
    ([("unverified", None)] * 5, 0.75),  # never fail open: unchecked counts as unsupported
])
def test_the_evidence_weighs_each_flagged_sentence_by_its_severity(
    verdicts: list[Any], expected: float
) -> None:
    sentences = [sentence(i, v[0], v[1], entity=len(v) > 2) for i, v in enumerate(verdicts)]
    share, _ = evidence(sentences)
    assert share == pytest.approx(expected)
    score, shared, _ = grounded_score(sentences)
    assert shared == share and score == load_scale()(share)


def test_a_passed_sentence_adds_its_remaining_doubt_once_something_is_flagged() -> None:
    doubtful = sentence(0, "supported").model_copy(update={"score": 0.7})
    flagged = sentence(1, "hallucinated", "contradiction")
    assert evidence([doubtful, flagged])[0] == pytest.approx((0.3 + 1.0) / 2)
    assert evidence([doubtful, sentence(1, "supported")])[0] == 0.0  # nothing flagged: a 5


def test_the_score_falls_as_more_of_the_text_is_wrong() -> None:
    scores = [grounded_score([sentence(i, "hallucinated" if i < wrong else "supported",
                                       "contradiction" if i < wrong else None)
                              for i in range(5)])[0] for wrong in range(6)]
    assert scores == sorted(scores, reverse=True) and scores[0] == 5 and scores[-1] < 2


def test_headings_do_not_count_and_the_share_is_weighted() -> None:
    sentences = [sentence(0, "hallucinated", "contradiction"), sentence(1, "supported"),
                 sentence(2, "supported", checked=False)]
    _, share, findings = grounded_score(sentences)
    assert share == 0.5 and [f.severity for f in findings] == ["contradiction"]


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

    response = "The library opened in 1962. It is run by a charity."
    result = _checker(respond, mitigate=False, judge_reasoning="model").check(
        "The library opened in 1962. The city council runs it.", response)
    judged = result.judge_refined
    assert judged is not None and judged.mode == "grounded" and judged.scored_by == "verdicts"
    assert judged.share == pytest.approx(0.375)  # one unsupported of two, by weight
    assert judged.score == load_scale()(0.375) and judged.reasoning_status == "checked"
    assert [f.severity for f in judged.findings] == ["unsupported"]
    (error,) = judged.errors  # tied to its sentence by offsets in the judged text
    assert response[error.start:error.end] == "It is run by a charity." == error.sentence
    assert len(asked) == 2


def test_with_nothing_flagged_the_grounded_judge_asks_nothing_and_invents_nothing() -> None:
    calls: list[str] = []

    def respond(messages: list[Any]) -> str:
        calls.append(messages[0]["content"])
        return rule_responder()(messages)

    result = _checker(respond, mitigate=False).check(
        "The library opened in 1962.", "The library opened in 1962.")
    judged = result.judge_refined
    assert judged is not None and judged.score == 5 and judged.errors == []
    assert judged.reasoning.startswith("Every checked sentence is supported by the source.")
    assert not any("You write the reasoning" in c for c in calls)


def _completion(text: str, digit_top: dict[str, float]) -> Completion:
    """A scripted reply whose score token carries the given alternatives."""
    head, digit, tail = text.rpartition('"score": ')[0] + '"score": ', text[-2], "}"
    tokens = (TokenLogprob(head, 0.0, {}), TokenLogprob(digit, -0.1, digit_top),
              TokenLogprob(tail, 0.0, {}))
    return Completion(text=text, usage=CallUsage(), logprobs=tokens)


def test_the_rubric_score_is_the_mean_of_the_score_tokens_distribution() -> None:
    text = json.dumps({"errors": [{"sentence": "It is run by a charity.", "problem": "wrong",
                                   "source": "The city council runs it"}], "score": 2})
    top = {"2": math.log(0.6), "3": math.log(0.3), "1": math.log(0.1)}
    backend = ScriptedBackend([_completion(text, top)], logprobs=20)
    judged, _ = judge(backend, "The library opened in 1962. The city council runs it.",
                      "The library opened in 1962. It is run by a charity.", Settings())
    assert judged.scored_by == "distribution"
    assert judged.score == pytest.approx(0.1 * 1 + 0.6 * 2 + 0.3 * 3)
    assert judged.distribution is not None and judged.distribution["2"] == pytest.approx(0.6)
    (error,) = judged.errors
    assert error.start == 28 and error.source_quote == "The city council runs it"


def test_without_log_probabilities_the_rubric_score_is_the_token_and_says_so() -> None:
    text = json.dumps({"errors": [], "score": 5})
    judged, _ = judge(ScriptedBackend([text]), "The library opened in 1962.",
                      "The library opened in 1962.", Settings())
    assert judged.score == 5 and judged.scored_by == "token"
    assert judged.note is not None and "no log-probabilities" in judged.note


def test_errors_the_rubric_judge_invents_are_dropped_and_counted() -> None:
    invented = json.dumps({"errors": [
        {"sentence": "The opening date is different.", "problem": "wrong date", "source": ""},
        {"sentence": "The library opened in 1962.", "problem": "wrong year",
         "source": "it opened in 1965"},  # the source says no such thing
        {"sentence": "It lends books.", "problem": "unsupported", "source": ""},
    ], "score": 3})
    judged, _ = judge(ScriptedBackend([invented]), "The library opened in 1962.",
                      "The library opened in 1962. It lends books.", Settings())
    assert judged.dropped_errors == 2
    assert [e.sentence for e in judged.errors] == ["It lends books."]
    assert "2 other error(s)" in judged.reasoning and "opening date" not in judged.reasoning


def test_judge_mode_front_doors_use_the_configured_judge(tmp_path: Any) -> None:
    from conli.batch.work import make_worker
    from conli.run.plan import RunOptions
    from conli.run.request import RunRequest

    nli = rule_responder(bad=("charity",))

    def respond(messages: list[Any]) -> str:
        if "You write the reasoning" in messages[0]["content"]:
            return json.dumps({"reasoning": 'The text says "It is run by a charity." wrongly.'})
        if "You grade how faithful" in messages[0]["content"]:
            return json.dumps({"errors": [], "score": 5})
        return nli(messages)

    source, response = "The library opened in 1962.", "It opened in 1962. It is run by a charity."
    checker = _checker(respond)
    judge = RunOptions.for_mode("judge")
    graded = checker.run_judge(RunRequest.of(source, response, limits=checker.settings,
                                             options=judge))
    assert graded.judge.mode == "grounded" and graded.judge.score == load_scale()(0.375)
    assert graded.usage.calls >= 2  # detection, then the reasoning
    rubric = checker.run_judge(RunRequest.of(source, response, limits=checker.settings,
                                             options=RunOptions(judge_mode="rubric")))
    # the rubric says 5, but detection flagged a sentence: bounded at 4
    assert rubric.judge.mode == "rubric" and rubric.judge.score == 4
    assert rubric.judge.bounded_from == 5
    worker = make_worker(checker.settings, "judge", checker.backend)
    record = worker({"id": "r1", "source": source, "response": response})
    assert record["result"]["judge"]["mode"] == "grounded"
    assert record["result"]["judge"]["score"] == load_scale()(0.375)


def test_in_a_check_the_rubric_judge_shows_no_error_on_a_sentence_detection_verified() -> None:
    nli = rule_responder()  # every claim entailed: detection finds nothing

    def respond(messages: list[Any]) -> str:
        if "You grade how faithful" in messages[0]["content"]:  # invents a discrepancy
            return json.dumps({"errors": [{"sentence": "The library opened in 1962.",
                                           "problem": "the opening date is different",
                                           "source": ""}], "score": 4})
        return nli(messages)

    checker = _checker(respond, mitigate=False)
    settings = checker.settings.model_copy(update={"judge_mode": "rubric"})
    result = Checker(settings, backend=checker.backend).check(
        "The library opened in 1962.", "The library opened in 1962.")
    judged = result.judge_refined
    assert result.verdict == "supported" and judged is not None
    assert judged.errors == [] and judged.dropped_errors == 1
    assert "opening date" not in judged.reasoning
    assert "could not be found" not in judged.reasoning  # it was found: detection passed it
    assert judged.note is not None and "detection verified" in judged.note
    assert "tied to no sentence" in judged.note  # a 4 with nothing shown says so
    alone, _ = judge(ScriptedBackend([respond([{"content": "You grade how faithful"}])]),
                     "The library opened in 1962.", "The library opened in 1962.", Settings())
    assert len(alone.errors) == 1  # without detection (judge only) the judge's error stands


def test_a_nearly_copied_sentence_is_widened_to_its_whole_sentence_past_a_decimal() -> None:
    from conli.judges.rubric import sentence_span

    text = "The pool cost 2.4 million dollars. It opened in June."
    start, end = sentence_span("the pool cost 2", text)  # cut short, and case differs
    assert text[start:end] == "The pool cost 2.4 million dollars."
    start, end = sentence_span("it opened in june", text)
    assert text[start:end] == "It opened in June."
