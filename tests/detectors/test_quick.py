"""``quick``: the one-token check's P(supported) weighed with the reading, no generation.

A backend behind our contracts both reads itself (``TinyReader``) and answers the
checker's question with a scripted Yes or No; the shipped classifier decides.
"""

from __future__ import annotations

import math

import pytest

from conli.backends.base import (
    CallUsage,
    Capabilities,
    Completion,
    Message,
    TokenLogprob,
)
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.detectors import resolve
from conli.detectors.quick import QuickDetector
from conli.errors import ConfigError
from conli.models import Judgement
from conli.pipeline import Checker
from conli.signals.features import SentenceSignals
from conli.signals.lexical import SourceWords, overlap
from conli.signals.model import QUICK_ARTIFACT, load_model
from tests.support.readers import TinyReader
from tests.support.signals import RESPONSE, SOURCE

CLAIM = "It was designed by a firm from Boston."


class Answering(TinyReader, ScriptedBackend):
    """Reads itself and answers every one-token question with P(Yes) = ``p_yes``."""

    name, model = "answering", "tiny"

    def __init__(self, p_yes: float) -> None:
        TinyReader.__init__(self)
        ScriptedBackend.__init__(self, responder=self.answer, logprobs=20,
                                 capabilities=Capabilities(hidden_states=True,
                                                           context_window=8192))
        self.p_yes = p_yes

    def answer(self, _: list[Message]) -> Completion:
        word = "Yes" if self.p_yes > 0.5 else "No"
        top = {"Yes": math.log(self.p_yes), "No": math.log(1 - self.p_yes)}
        return Completion(text=word, usage=CallUsage(prompt_tokens=10, completion_tokens=1),
                          logprobs=(TokenLogprob(word, top[word], top),))


def _asked(score: float | None, error: str | None = None) -> Judgement:
    return Judgement(detector="yesno", hypothesis=CLAIM, score=score, error=error,
                     verdict="unverified" if score is None else "supported",
                     reasoning=f"yes/no check: P(supported) {score}", template="minicheck.v1")


def _signals(pmi_low: float) -> SentenceSignals:
    return SentenceSignals(0, {"pmi_low": pmi_low}, overlap(CLAIM, SourceWords.of(SOURCE)))


def test_what_the_one_token_check_could_not_score_stays_unverified() -> None:
    model = load_model(QUICK_ARTIFACT)
    answered = QuickDetector()._judge(CLAIM, [_asked(None, "invalid answer: 'Maybe'")],
                                      _signals(0.0), model, "signals_read.v1")
    assert answered.verdict == "unverified" and answered.error == "invalid answer: 'Maybe'"
    assert QuickDetector()._judge(CLAIM, [], _signals(0.0), model, "r").verdict == "unverified"
    no_tokens = QuickDetector()._judge(CLAIM, [_asked(0.99)], None, model, "r")
    assert no_tokens.verdict == "unverified" and "no tokens" in (no_tokens.error or "")


@pytest.mark.parametrize(("p_yes", "pmi_low", "verdict"), [
    (0.98, 0.0, "supported"), (0.05, 0.0, "hallucinated"), (0.98, 1.0, "hallucinated")])
def test_both_signals_decide_and_the_reason_names_both(p_yes: float, pmi_low: float,
                                                       verdict: str) -> None:
    judged = QuickDetector()._judge(CLAIM, [_asked(p_yes)], _signals(pmi_low),
                                    load_model(QUICK_ARTIFACT), "signals_read.v1")
    assert judged.verdict == verdict and judged.detector == "quick"
    assert "P(supported)" in judged.reasoning and "less likely" in judged.reasoning
    assert judged.template == "minicheck.v1+signals_read.v1+quick.v1"
    assert judged.features == {"pmi_low": pmi_low, "yes_p": p_yes}


def test_the_shipped_fit_reads_the_reading_and_the_answer_and_names_its_data() -> None:
    model = load_model(QUICK_ARTIFACT)
    assert model.features == ("pmi_low", "yes_p")
    assert model.coef[0] > 0 > model.coef[1]  # less likely tokens flag; a Yes passes
    assert "509 dev examples" in model.training["fitted_on"]


def _deciding(p_yes: float) -> Judgement:
    """The quick judgement of the response's first sentence, on a backend answering p_yes."""
    backend = Answering(p_yes)
    settings = Settings(llm="fake", detectors=["quick"], mitigate=False, judge=False)
    with Checker(settings, backend=backend) as checker:
        result = checker.check(SOURCE, RESPONSE)
    assert len(backend.calls) == 2  # one answer token a sentence; the reading is no call
    first = result.sentences[0]  # stated in the source (the second names Boston: the rule)
    assert [j.detector for j in first.judgements] == ["quick"]  # yesno's is superseded
    assert first.verdict == first.judgements[0].verdict
    return first.judgements[0]


def test_a_check_runs_yesno_then_quick_and_a_no_lowers_support() -> None:
    assert resolve(Settings(detectors=["quick"])) == ["yesno", "quick", "coverage_overlap"]
    yes, no = _deciding(0.99), _deciding(0.01)
    assert yes.features["yes_p"] == 0.99 and no.features["yes_p"] == 0.01
    assert yes.features["pmi_low"] == no.features["pmi_low"]  # the same reading
    assert (yes.score or 0.0) > (no.score or 1.0)
    assert no.verdict == "hallucinated"


def test_a_judged_check_names_the_quick_artifact_in_its_audit() -> None:
    settings = Settings(llm="fake", detectors=["quick"], mitigate=False, judge=True)
    with Checker(settings, backend=Answering(0.99)) as checker:
        result = checker.check(SOURCE, RESPONSE)
    assert result.judge_raw is not None and result.judge_raw.audit is not None
    assert result.judge_raw.audit.artifacts == {"quick": "quick.v1"}


@pytest.mark.parametrize("detector", ["quick", "fused", "fast"])
def test_a_reader_on_a_model_that_cannot_read_is_refused_before_any_call(
        detector: str) -> None:
    hosted = ScriptedBackend(responder=lambda _: "Yes", logprobs=20)  # no forward pass
    settings = Settings(llm="fake", detectors=[detector], mitigate=False, judge=False)
    with pytest.raises(ConfigError) as refused:
        Checker(settings, backend=hosted).check(SOURCE, RESPONSE)
    assert "forward pass" in str(refused.value) and "--llm local" in str(refused.value)
    assert hosted.calls == []  # nothing asked, nothing paid
