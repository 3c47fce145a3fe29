"""``yesno``: the checker format on the run's own model, one token a sentence.

A scripted backend behind our contract answers Yes or No with log-probabilities; the
detector cuts P(Yes) at the threshold fitted for the embedded model when the run's model is
that one, at 0.5 on any other, and at the user's own threshold when one is set.
"""

from __future__ import annotations

import math

import pytest

from conli.backends.base import CallUsage, Completion, Message, TokenLogprob
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.detectors import yesno
from conli.detectors.yesno import DEFAULT_THRESHOLD, YesNo, YesNoOptions, fitted
from conli.pipeline import Checker

SOURCE = "The Millbrook pool opened on Saturday, June 14. It cost 2.4 million dollars."
RESPONSE = "The pool opened on Saturday. It cost 2.4 million dollars."


def yes(p_yes: float) -> Completion:
    """One answer token, Yes or No, with both as alternatives."""
    word = "Yes" if p_yes > 0.5 else "No"
    top = {"Yes": math.log(p_yes), "No": math.log(1 - p_yes)}
    return Completion(text=word, usage=CallUsage(prompt_tokens=10, completion_tokens=1),
                      logprobs=(TokenLogprob(word, top[word], top),))


def embedded_like(p_yes: float) -> ScriptedBackend:
    """A scripted backend that names itself as the model the threshold was fitted for."""
    backend = ScriptedBackend(responder=lambda _: yes(p_yes), logprobs=20)
    backend.name, backend.model = fitted()["backend"], fitted()["model"]  # type: ignore[misc]
    return backend


def check(backend: ScriptedBackend, **options: float) -> str:
    settings = Settings(llm="fake", detectors=["yesno"], mitigate=False, judge=False,
                        detector_options={"yesno": options} if options else {})
    with Checker(settings, backend=backend) as checker:
        return checker.check(SOURCE, RESPONSE).verdict


@pytest.mark.parametrize("cut", [0.2, 0.8])
def test_the_fitted_threshold_applies_on_the_model_it_was_fitted_for(
        cut: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yesno, "fitted", lambda: {**fitted(), "threshold": cut})
    p = (cut + DEFAULT_THRESHOLD) / 2  # between the fitted cut and 0.5
    on_embedded = check(embedded_like(p))
    on_other = check(ScriptedBackend(responder=lambda _: yes(p), logprobs=20))
    assert on_embedded == ("supported" if p > cut else "hallucinated")
    assert on_other == ("supported" if p > DEFAULT_THRESHOLD else "hallucinated")


def test_the_shipped_fit_names_its_model_template_and_data() -> None:
    fit = fitted()
    assert fit["template"] == "minicheck.v1" and 0 < fit["threshold"] < 1
    assert fit["backend"] == "local" and fit["model"].endswith(".gguf")


def test_a_threshold_the_user_sets_wins() -> None:
    assert check(embedded_like(0.7), threshold=0.8) == "hallucinated"
    assert check(embedded_like(0.7), threshold=0.6) == "supported"


def test_each_sentence_is_asked_with_the_source_first_one_token_each() -> None:
    backend = embedded_like(0.95)
    assert check(backend) == "supported"
    assert len(backend.calls) == 2  # one call a sentence
    firsts = [_until_claim(messages) for messages in backend.calls]
    assert firsts[0] == firsts[1]  # the prefix through the source is shared: cached
    assert SOURCE in firsts[0]


def _until_claim(messages: list[Message]) -> str:
    text = "\n".join(m["content"] for m in messages)
    return text.split("\nClaim: ")[0]


def test_without_log_probabilities_it_is_verdict_only_and_never_passes_prose() -> None:
    backend = ScriptedBackend(responder=lambda _: "I cannot tell.", logprobs=0)
    settings = Settings(llm="fake", detectors=["yesno"], mitigate=False, judge=False)
    with Checker(settings, backend=backend) as checker:
        result = checker.check(SOURCE, RESPONSE)
    assert result.verdict == "unverified"


def test_options_are_validated() -> None:
    with pytest.raises(ValueError):
        YesNoOptions(threshold=1.5)
    assert YesNo().threshold_for(ScriptedBackend()) == DEFAULT_THRESHOLD
