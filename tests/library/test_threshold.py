"""The user's bar: ``threshold`` / ``CONLI_THRESHOLD`` on the support score and ``passed``."""

from __future__ import annotations

import pytest

import tests.support.score_detector  # noqa: F401 - registers the "scored" detector
from conli import Checker, Settings
from conli.backends.fake import ScriptedBackend
from conli.errors import ConfigError
from conli.gate import fails, outcome
from conli.run.doors import settings_from
from conli.run.plan import make_plan

SOURCE = "The library opened in 1962. It lends books free of charge."
BASE = {"detectors": ["scored"], "mitigate": False, "judge": False, "word_scores": "off"}


def _checker(**settings: object) -> Checker:
    return Checker(Settings(**{**BASE, **settings}), backend=ScriptedBackend())  # type: ignore[arg-type]


def test_without_a_threshold_passed_is_the_verdict() -> None:
    checker = _checker()
    good = checker.check(SOURCE, "It opened in 1962 score90.")
    bad = checker.check(SOURCE, "It opened in 1962 score90. It charges score20.")
    assert (good.verdict, good.passed, good.threshold) == ("supported", True, None)
    assert (bad.verdict, bad.passed) == ("hallucinated", False)


def test_a_threshold_raises_the_bar_and_leaves_the_verdict() -> None:
    checker = _checker(threshold=0.8)
    strict = checker.check(SOURCE, "It opened in 1962 score90. It lends books score60.")
    assert strict.verdict == "supported" and strict.support_score == 0.6
    assert strict.passed is False and strict.threshold == 0.8
    loose = checker.check(SOURCE, "It lends books score40.",
                          plan=make_plan(Settings(**{**BASE, "threshold": 0.3})))  # type: ignore[arg-type]
    # every score clears 0.3, but a hallucinated result never passes (issue 45)
    assert loose.verdict == "hallucinated" and loose.passed is False
    assert loose.threshold == 0.3 and fails(loose, "hallucinated")


def test_a_sentence_without_a_score_cannot_pass_a_threshold() -> None:
    result = _checker(threshold=0.1).check(SOURCE, "It opened in 1962 score90. It lends books.")
    assert result.verdict == "supported" and result.passed is False


def test_an_unverified_result_never_passes() -> None:
    # a claim no detector judged is unverified (an empty detector list is refused, so a
    # detector that judges nothing stands in)
    class Silent:
        name = "silent"
        supersedes: frozenset[str] = frozenset()

        def detect(self, context):  # type: ignore[no-untyped-def]
            from conli.detectors.base import Detection
            return Detection()

    from conli import detectors
    detectors.register("silent", Silent)
    result = _checker(detectors=["silent"], threshold=0.0).check(SOURCE, "It opened in 1962.")
    assert result.verdict == "unverified" and result.passed is False
    assert outcome(result) == "unverified"
    assert fails(result, "unverified") and not fails(result, "hallucinated")


def test_conli_threshold_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONLI_THRESHOLD", "0.7")
    assert settings_from({}).threshold == 0.7
    monkeypatch.setenv("CONLI_THRESHOLD", "1.5")
    with pytest.raises(ConfigError, match="threshold"):
        settings_from({})


def test_with_a_calibration_too_it_decides_verdicts_and_the_threshold_passed(tmp_path) -> None:
    from conli.calibration import Calibration

    settings = _checker().settings
    calibration = Calibration(
        backend="fake", model="scripted", detectors=["scored"], nli_prompt=settings.nli_prompt,
        method="threshold", flag_at=0.5, examples=40, hallucinated=20, data_sha256="0" * 64,
        folds=5, balanced_accuracy_before=0.5, balanced_accuracy_after=0.8,
        created_utc="2026-01-01T00:00:00+00:00", conli_version="0.1.0")
    path = tmp_path / "calibration.json"
    path.write_text(calibration.model_dump_json(), encoding="utf-8")
    # a calibration alone: its cut decides the verdict, and passed follows the verdict
    calibrated = _checker(calibration=path).check(SOURCE, "It lends books score55.")
    assert (calibrated.verdict, calibrated.passed, calibrated.threshold) == ("supported", True,
                                                                            None)
    # both: the calibration still decides the verdict, the explicit threshold decides passed
    both = _checker(calibration=path, threshold=0.6).check(SOURCE, "It lends books score55.")
    assert both.verdict == "supported" and both.calibration is not None
    assert both.passed is False and both.threshold == 0.6
