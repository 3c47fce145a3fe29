"""The fused detector: NLI's judgement weighed with the reading, and the shipped artifacts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conli.agents.nli_prompts import resolve
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.detectors.fused import FusedDetector, nli_features
from conli.models import Judgement
from conli.signals.features import SentenceSignals
from conli.signals.lexical import SourceWords, overlap
from conli.signals.model import ARTIFACT, FUSED_ARTIFACT, SignalModel, load_model
from tests.support.paths import TESTS
from tests.support.signals import Reader

FIXTURE = TESTS / "fixtures" / "signal_models.json"
CLAIM = "The pool was designed by a firm from Boston."
MODEL = SignalModel(  # flags on pmi_low, and on NLI's flag as strongly
    version="fused.test", features=("pmi_low", "nli_support", "nli_flagged"),
    mean=(0.0, 0.0, 0.0), scale=(1.0, 1.0, 1.0), coef=(4.0, -1.0, 3.0), intercept=-2.5,
    threshold=0.5, band=(0.5, 1.0),
)


def _nli(verdict: str, score: float | None = 0.9) -> Judgement:
    return Judgement(detector="sentence_nli", hypothesis=CLAIM, verdict=verdict, score=score,
                     reasoning="the source names no designer" if verdict != "supported" else "",
                     evidence="The Millbrook pool cost 2.4 million dollars.")


def _signals(pmi_low: float, claim: str = CLAIM) -> SentenceSignals:
    words = overlap(claim, SourceWords.of("The Millbrook pool cost 2.4 million dollars."))
    values = {"pmi_low": pmi_low, "novel_numbers": float(len(words.novel_numbers))}
    return SentenceSignals(0, values, words)


def test_nli_features_read_the_lowest_score_and_any_flag() -> None:
    assert nli_features([_nli("supported", 0.9), _nli("hallucinated", 0.2)]) == {
        "nli_support": 0.2, "nli_flagged": 1.0, "nli_contradiction": 0.0}  # neutral: no label
    assert nli_features([_nli("supported", None)]) == {
        "nli_support": 0.5, "nli_flagged": 0.0, "nli_contradiction": 0.0}
    contradicted = _nli("hallucinated", 0.1).model_copy(update={"label": "contradiction"})
    assert nli_features([contradicted])["nli_contradiction"] == 1.0


def test_what_nli_could_not_check_stays_unverified_whatever_the_signals_say() -> None:
    judged = FusedDetector()._judge(CLAIM, [_nli("unverified", None)], _signals(0.0), MODEL)
    assert judged.verdict == "unverified" and judged.error
    assert FusedDetector()._judge(CLAIM, [], _signals(0.0), MODEL).verdict == "unverified"
    assert FusedDetector()._judge(CLAIM, [_nli("supported")], None, MODEL).verdict == "unverified"


def test_the_signals_can_flag_what_nli_passed_and_say_why() -> None:
    judged = FusedDetector()._judge(CLAIM, [_nli("supported")], _signals(0.9), MODEL)
    assert judged.verdict == "hallucinated" and judged.detector == "fused"
    assert judged.reasoning.startswith("chain-of-thought NLI found it supported, but")
    assert judged.score is not None and judged.score < 0.5
    # its reason is the signals' flag, not an entailment "claimed without quoting"
    assert FusedDetector().reason(judged).startswith(
        "flagged by the signals: chain-of-thought NLI found it supported, but")


def test_a_weak_nli_flag_can_be_overruled_and_keeps_its_reason() -> None:
    judged = FusedDetector()._judge(CLAIM, [_nli("hallucinated", 0.9)], _signals(0.0),
                                    SignalModel(**{**MODEL.__dict__, "coef": (4.0, -1.0, 1.0)}))
    assert judged.verdict == "supported"
    assert judged.reasoning.startswith("overruled") and "names no designer" in judged.reasoning


def test_an_nli_flag_on_a_number_the_source_never_states_is_never_overruled() -> None:
    lenient = SignalModel(**{**MODEL.__dict__, "coef": (4.0, -1.0, 1.0),
                             "keep_nli_flag_if": ("novel_numbers",)})
    swapped = "The pool cost 4.2 million dollars."
    judged = FusedDetector()._judge(swapped, [_nli("hallucinated", 0.9)],
                                    _signals(0.0, swapped), lenient)
    assert judged.verdict == "hallucinated" and "4.2" in judged.reasoning
    # the same weak flag without a new number is overruled, as above
    plain = FusedDetector()._judge(CLAIM, [_nli("hallucinated", 0.9)], _signals(0.0), lenient)
    assert plain.verdict == "supported"


def test_auto_is_fused_on_a_model_that_reads_itself_and_cot_elsewhere() -> None:
    assert resolve(Settings(), Reader()).detectors == ["fused"]
    assert resolve(Settings(), ScriptedBackend()).detectors == ["cot"]
    assert resolve(Settings(detectors=["fast"]), Reader()).detectors == ["fast"]


@pytest.mark.parametrize("path", [ARTIFACT, FUSED_ARTIFACT], ids=["signals", "fused"])
def test_the_shipped_artifacts_reproduce_their_stored_scores(path: Path) -> None:
    model = load_model(path)
    stored = json.loads(FIXTURE.read_text())[model.version]
    for case in stored:
        assert math.isclose(model.probability(case["values"]), case["probability"],
                            rel_tol=1e-9)
    manifest = model.training
    assert manifest["seed"] == 0 and manifest["leave_one_dataset_out"]["balanced_accuracy"] > 0.5
    assert all(len(f["sha256"]) == 64 for f in manifest["data_files"].values())
