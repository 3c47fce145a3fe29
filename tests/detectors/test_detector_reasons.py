"""Each detector words its own reasons; NLI's wording is the default (issue 31)."""

from __future__ import annotations

import pytest

import tests.support.word_detector  # registers "word": no label, a reasoning of its own
from conli import detectors
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.detectors.base import Detection, DetectionContext, default_reason, reason_for
from conli.models import Entity, Judgement, SentenceResult
from conli.pipeline import Checker
from tests.support.responders import rule_responder

SOURCE = "The library opened in 1962. It lends books free of charge."
RESPONSE = "The library opened in 1962. It charges a FALSE fee per book."


class Worded(tests.support.word_detector.WordDetector):
    """The word detector, wording its reasons itself."""

    name = "worded"

    def reason(self, judgement: Judgement) -> str:
        """Its own words, and which claim they are about."""
        return f"the word detector objects to {judgement.hypothesis!r}"


class Silent:
    """Flags every claim with neither a label nor a reasoning."""

    name = "silent"
    supersedes: frozenset[str] = frozenset()

    def detect(self, context: DetectionContext) -> Detection:
        """One bare judgement per claim."""
        return Detection(judgements={c.index: [Judgement(
            detector=self.name, hypothesis=c.text, verdict="hallucinated")]
            for c in context.claims})


@pytest.fixture(autouse=True)
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the detectors above in a registry restored afterwards."""
    monkeypatch.setattr(detectors, "_REGISTRY", dict(detectors._REGISTRY))
    monkeypatch.setattr(detectors, "_OPTIONS", dict(detectors._OPTIONS))
    detectors.register(Worded.name, Worded)
    detectors.register(Silent.name, Silent)


def _flagged(name: str) -> list[SentenceResult]:
    """The sentences of RESPONSE that detector ``name`` flags."""
    settings = Settings(_env_file=None, detectors=[name], mitigate=False,  # type: ignore[call-arg]
                        judge=False)
    checker = Checker(settings, backend=ScriptedBackend(responder=rule_responder()))
    try:
        sentences = checker.check(SOURCE, RESPONSE).sentences
    finally:
        checker.close()
    return [s for s in sentences if s.verdict == "hallucinated"]


def test_a_detector_with_no_label_gives_its_reasoning_and_no_none() -> None:
    assert [s.reasons for s in _flagged("word")] == [["contains 'FALSE'"]]
    assert [s.reasons for s in _flagged(Silent.name)] == [["flagged by silent"]] * 2


def test_a_detector_that_words_its_reasons_gets_its_wording() -> None:
    [flagged] = _flagged(Worded.name)
    assert flagged.reasons == [f"the word detector objects to {flagged.text!r}"]
    assert flagged.detector == Worded.name


def test_nli_judgements_keep_their_wording_byte_for_byte() -> None:
    entity = Entity(text="1989", label="DATE", category="DateTime", start=0, end=4)
    judged = Judgement(detector="entity_nli", hypothesis="h", verdict="hallucinated",
                       label="contradiction", reasoning="The source says 1998.", entity=entity,
                       evidence="opened in 1998", evidence_in_source=True)
    assert default_reason(judged) == \
        '[1989] contradiction: The source says 1998. Source: "opened in 1998"'
    unquoted = judged.model_copy(update={"label": "entailment", "entity": None,
                                         "evidence_in_source": False})
    assert default_reason(unquoted) == ("entailment claimed without quoting the source: The "
                                        'source says 1998. Quoted, but not found in the '
                                        'source: "opened in 1998"')
    failed = Judgement(detector="sentence_nli", hypothesis="h", verdict="unverified",
                       error="the model timed out")
    assert default_reason(failed) == "could not be checked: the model timed out"
    assert reason_for(None, judged) == default_reason(judged)  # a detector the run lacks
