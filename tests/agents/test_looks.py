"""Several looks: k chains of thought per claim, the first as usual, the rest sampled."""

from typing import Any

import pytest

from conli.agents.looks import combine_looks
from conli.agents.nli import Hypothesis
from conli.backends.base import Completion, CompletionRequest
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.models import Judgement, NLILabel, Verdict
from tests.support.responders import nli

SOURCE = "The museum opened in 1931 and has three floors."
CLAIM = Hypothesis(0, "The museum opened in 1931.")


class SeedRecorder(ScriptedBackend):
    """A scripted backend that also keeps each call's temperature and seed."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__(replies)
        self.sampling: list[tuple[float, int | None]] = []

    def complete(self, request: CompletionRequest) -> Completion:
        self.sampling.append((request.temperature, request.seed))
        return super().complete(request)


def answer(label: str) -> str:
    return f'{{"evidence": "opened in 1931", "reasoning": "because {label}", "label": "{label}"}}'


def test_the_first_look_is_greedy_and_the_others_sampled_with_their_own_seeds() -> None:
    backend = SeedRecorder([answer("entailment"), answer("neutral"), answer("neutral")])
    settings = Settings(nli_looks=3, nli_look_temperature=0.9)
    (judged,), calls = nli(backend, SOURCE, [CLAIM], kind="sentence", settings=settings)
    assert backend.sampling == [(0.0, None), (0.9, 1), (0.9, 2)]
    assert len(calls) == 3
    assert judged.verdict == "hallucinated"
    assert [look.verdict for look in judged.looks or []] == [
        "supported", "hallucinated", "hallucinated"]
    assert judged.score == pytest.approx(1 / 3)  # no label token read: verdicts as 0 or 1
    assert judged.reasoning.startswith("because neutral")  # a look that agrees with the vote
    assert "1 of 3 looks" in judged.reasoning


def test_a_tie_is_not_a_pass_and_a_majority_is() -> None:
    tie = SeedRecorder([answer("entailment"), answer("contradiction")])
    (judged,), _ = nli(tie, SOURCE, [CLAIM], kind="sentence", settings=Settings(nli_looks=2))
    assert (judged.verdict, judged.score) == ("hallucinated", 0.5)
    majority = SeedRecorder([answer("neutral"), answer("entailment"), answer("entailment")])
    (judged,), _ = nli(majority, SOURCE, [CLAIM], kind="sentence",
                       settings=Settings(nli_looks=3))
    assert judged.verdict == "supported" and judged.label == "entailment"
    assert judged.reasoning.startswith("because entailment")


def test_a_look_that_cannot_complete_leaves_the_claim_unverified() -> None:
    broken = "not json at all"
    backend = SeedRecorder([answer("entailment"), broken, broken, answer("entailment")])
    (judged,), calls = nli(backend, SOURCE, [CLAIM], kind="sentence",
                           settings=Settings(nli_looks=3))
    assert judged.verdict == "unverified"
    assert judged.error is not None and judged.error.startswith("1 of 3 looks could not complete")
    assert len(calls) == 4  # the failed look was re-asked once; the vote was not taken on two


def test_one_look_is_one_call_and_records_no_looks() -> None:
    backend = SeedRecorder([answer("entailment")])
    (judged,), calls = nli(backend, SOURCE, [CLAIM], kind="sentence", settings=Settings())
    assert len(calls) == 1 and judged.verdict == "supported" and judged.looks is None


def test_most_looks_decide_and_the_score_is_their_mean_label_probability() -> None:
    def look(verdict: Verdict, score: float | None, label: NLILabel = "entailment"
             ) -> Judgement:
        return Judgement(detector="sentence_nli", hypothesis="h", verdict=verdict,
                         label=label, score=score)

    combined = combine_looks([look("supported", 0.9), look("hallucinated", 0.95),
                              look("hallucinated", 0.1, "neutral")])
    assert combined.verdict == "hallucinated" and combined.score == pytest.approx(0.65)
    assert [x.score for x in combined.looks or []] == [0.9, 0.95, 0.1]
    # every look passes with a low label token: a pass, never a flag argued as support
    unsure = combine_looks([look("supported", 0.4)] * 3)
    assert unsure.verdict == "supported" and unsure.score == pytest.approx(0.4)
    with pytest.raises(ValueError):
        combine_looks([])


def test_looks_on_flagged_look_again_only_at_what_the_first_look_does_not_pass() -> None:
    claims = [CLAIM, Hypothesis(1, "The museum has three floors.")]
    # first look: one call per claim (one hypothesis a call); claim 0 passes, claim 1 does not
    backend = SeedRecorder([answer("entailment"), answer("neutral"),
                            answer("entailment"), answer("entailment")])
    settings = Settings(nli_looks=3, nli_looks_on="flagged", hypotheses_per_call=1)
    (kept, revised), calls = nli(backend, SOURCE, claims, kind="sentence", settings=settings)
    assert backend.sampling == [(0.0, None), (0.0, None), (0.7, 1), (0.7, 2)]
    assert len(calls) == 4
    assert kept.verdict == "supported" and kept.looks is None  # one look, as without looks
    assert revised.verdict == "supported"  # two sampled looks outvote the first
    assert [look.verdict for look in revised.looks or []] == [
        "hallucinated", "supported", "supported"]


def test_looks_on_flagged_with_every_claim_passed_makes_no_more_calls() -> None:
    backend = SeedRecorder([answer("entailment")])
    settings = Settings(nli_looks=3, nli_looks_on="flagged")
    (judged,), calls = nli(backend, SOURCE, [CLAIM], kind="sentence", settings=settings)
    assert len(calls) == 1 and judged.verdict == "supported" and judged.looks is None
