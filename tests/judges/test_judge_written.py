"""The grounded judge's reasoning written from its findings, with no model call (issue 64.3).

The score is computed from the findings before any reasoning is written, so it cannot
depend on who writes it: the same scripted verdicts give the same score, share, findings
and errors with the paragraph written from the findings (the default) and with the
model's prose (``judge_reasoning = model``). The written paragraph names every flagged
sentence and its reason, no sentence detection passed, and is never cut.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.judges.grounded import grounded_judge, grounded_score, load_scale
from conli.models import Entity, Judgement, SentenceResult
from conli.pipeline import Checker
from tests.support.responders import kind_of, rule_responder

PLACE = Entity(text="Boston", label="GPE", category="Location", start=0, end=6)
LONG = ("The pool, which " + "was praised by every visitor and " * 60
        + "opened in June, cost 4.2 million dollars.")


def _sentence(i: int, text: str, verdict: str, label: str | None = None, reason: str = "",
              *, entity: bool = False, score: float | None = None) -> SentenceResult:
    judgements = [] if label is None else [Judgement(
        detector="entity_nli" if entity else "sentence_nli", hypothesis=text,
        verdict=verdict, label=label, entity=PLACE if entity else None)]  # type: ignore[arg-type]
    return SentenceResult(index=i, text=text, start=0, end=len(text), checked=True,
                          verdict=verdict, judgements=judgements,  # type: ignore[arg-type]
                          reasons=[reason] if reason else [], score=score)


SENTENCES = [
    _sentence(0, "Millbrook opened a new pool on Saturday.", "supported", score=0.9),
    _sentence(1, "The pool cost 4.2 million dollars.", "hallucinated", "contradiction",
              "contradiction: The source says the pool cost 2.4 million dollars. "
              'Source: "2.4 million dollars to build"'),
    _sentence(2, "It was designed by a firm from Boston.", "hallucinated", "neutral",
              "[Boston] neutral: The source names no firm", entity=True),
    _sentence(3, "About 800 people came.", "unverified", reason="could not be checked: timeout"),
    _sentence(4, "It has six lanes.", "hallucinated", "neutral",
              "neutral: The source does not give the number of lanes."),
    _sentence(5, "It is open every day.", "supported", score=0.8),
]
TEXT = " ".join(s.text for s in SENTENCES)
PROSE = json.dumps({"reasoning": 'The text says "The pool cost 4.2 million dollars." wrongly.'})


def _judged(reasoning: str, sentences: list[SentenceResult] = SENTENCES,
            reply: str = PROSE) -> tuple[Any, list[Any], ScriptedBackend]:
    backend = ScriptedBackend(responder=lambda messages: reply)
    result, calls = grounded_judge(backend, "the source", " ".join(s.text for s in sentences),
                                   sentences, Settings(judge_reasoning=reasoning))
    return result, calls, backend


def test_the_score_is_the_same_whoever_writes_the_reasoning() -> None:
    written, no_calls, quiet = _judged("findings")
    prosed, calls, asked = _judged("model")
    assert no_calls == [] and quiet.calls == []  # written: no model call
    assert len(calls) == len(asked.calls) == 1 and kind_of(asked.calls[0]) == "reasoning"
    same = ("status", "score", "share", "findings", "errors", "scored_by", "mode")
    assert {k: getattr(written, k) for k in same} == {k: getattr(prosed, k) for k in same}
    score, _, findings = grounded_score(SENTENCES)  # the findings, through the scale
    assert written.score == pytest.approx(score, abs=1e-4) and written.findings == findings
    assert (written.reasoning_by, prosed.reasoning_by) == ("findings.v1", "judge_grounded.v1")
    scale = load_scale().version
    assert (written.template, prosed.template) == (f"findings.v1+{scale}",
                                                   f"judge_grounded.v1+{scale}")
    assert written.reasoning != prosed.reasoning


def test_the_same_check_scores_the_same_with_either_writer() -> None:
    def check(reasoning: str) -> Any:
        backend = ScriptedBackend(responder=rule_responder(bad=("Paris", "1850")))
        settings = Settings(judge_mode="grounded", entity_level=False, mitigate=False,
                            judge_reasoning=reasoning)  # type: ignore[arg-type]
        with Checker(settings, backend=backend) as checker:
            result = checker.check("Ada Lovelace lived in London. She was born in 1815.",
                                   "Ada Lovelace lived in Paris. She was born in 1850. "
                                   "She lived in London.")
        return result.judge_refined, [kind_of(c) for c in backend.calls]

    (written, kinds), (prosed, model_kinds) = check("findings"), check("model")
    assert "reasoning" not in kinds and model_kinds.count("reasoning") == 1
    assert written.score == prosed.score and written.findings == prosed.findings
    assert len(written.findings) == 2


def test_the_paragraph_names_every_flagged_sentence_and_its_reason_and_no_other() -> None:
    result, _, _ = _judged("findings")
    paragraph = result.reasoning
    assert paragraph.startswith("4 of 6 checked sentences are flagged: 1 contradicts the source, "
                                "2 are not supported by it and 1 has a minor detail it does not "
                                "state.")
    assert f"The text scores {result.score:.1f} of 5: " in paragraph
    for found in result.findings:
        assert f'"{found.sentence}"' in paragraph
    assert ('"The pool cost 4.2 million dollars." contradicts the source: The source says the '
            'pool cost 2.4 million dollars. Source: "2.4 million dollars to build".') in paragraph
    assert ('"It was designed by a firm from Boston." has a minor detail the source does not '
            'state ("Boston"): The source names no firm.') in paragraph
    assert ('"It has six lanes." is not supported by the source: The source does not give the '
            "number of lanes.") in paragraph
    assert ('"About 800 people came." could not be checked against the source, so it counts '
            "as not supported.") in paragraph
    for passed in ("Millbrook opened a new pool", "It is open every day"):
        assert passed not in paragraph
    # the rubric's meanings count details ("one minor detail"); only a level's name is said
    assert "cannot be verified" not in paragraph and "at least one" not in paragraph
    assert paragraph.endswith(".")


def test_a_long_sentence_and_reason_are_written_whole() -> None:
    reason = "contradiction: " + "The source gives another figure and another date. " * 30
    sentences = [_sentence(0, LONG, "hallucinated", "contradiction", reason.strip()),
                 _sentence(1, "It has six lanes.", "supported", score=1.0)]
    result, _, _ = _judged("findings", sentences)
    assert f'"{LONG}" contradicts the source: {reason[len("contradiction: "):].strip()}' \
        in result.reasoning
    assert result.reasoning.endswith("another date.")


def test_with_nothing_flagged_the_paragraph_says_so_and_gives_the_score() -> None:
    sentences = [_sentence(0, "It has six lanes.", "supported", score=1.0)]
    result, calls, _ = _judged("model", sentences)  # nothing to explain: no call either way
    assert calls == [] and result.reasoning_by == "findings.v1"
    assert result.reasoning == ("Every checked sentence is supported by the source. "
                                "The text scores 5.0 of 5: fully faithful.")


def test_prose_the_model_could_not_give_leaves_the_written_paragraph() -> None:
    written, _, _ = _judged("findings")
    dropped, calls, _ = _judged("model", reply='{"reasoning": "It says \\"nothing here\\"."}')
    assert len(calls) == 2  # asked, and re-asked once (max_reasks)
    assert dropped.reasoning_status == "dropped" and dropped.error
    assert dropped.reasoning == written.reasoning and dropped.reasoning_by == "findings.v1"
    assert dropped.score == written.score


@pytest.mark.parametrize("mode", ["grounded", "both"])
def test_the_check_asks_no_reasoning_by_default(mode: str) -> None:
    backend = ScriptedBackend(responder=rule_responder(bad=("Paris",)))
    with Checker(Settings(judge_mode=mode, entity_level=False, mitigate=False),
                 backend=backend) as checker:
        result = checker.check("Ada Lovelace lived in London.", "Ada Lovelace lived in Paris.")
    assert "reasoning" not in [kind_of(c) for c in backend.calls]
    judged = result.judge_refined
    assert judged is not None and judged.reasoning_by == "findings.v1"
    assert '"Ada Lovelace lived in Paris."' in judged.reasoning
