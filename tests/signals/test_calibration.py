"""`conli calibrate`: the cross-validated fit, its refusals, and the file at every front door."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from conli.calibration import (
    MIN_EXAMPLES,
    Scored,
    calibration_record,
    fit_calibration,
    refuse_unusable,
)
from conli.cli import app as cli
from conli.config import Settings
from conli.errors import ConfigError, InputError
from conli.models import CheckResult
from conli.pipeline import Checker
from conli.signals.model import SignalModel

SOURCE = "The library opened in 1921. It holds 40,000 books. The mayor attended the opening."


pytestmark = pytest.mark.usefixtures("reading_backend")


def _labelled(path: Path, n: int, *, hallucinated_every: int = 2) -> Path:
    lines = []
    for i in range(n):
        bad = i % hallucinated_every == 0
        response = ("The library opened in 1921. It holds 90,000 books." if bad
                    else "The library opened in 1921. It holds 40,000 books.")
        lines.append(json.dumps({"id": f"x{i}", "source": SOURCE, "response": response,
                                 "label": bad}))
    path.write_text("\n".join(lines) + "\n")
    return path


def _synthetic(n: int, seed: int = 0) -> list[Scored]:
    """The shipped decision passes everything; the scores separate the labels well."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        bad = i % 3 == 0
        support = rng.uniform(0.2, 0.6) if bad else rng.uniform(0.5, 0.95)
        out.append(Scored(bad, "supported", support))
    return out


@pytest.mark.slow
def test_the_cut_is_fitted_by_cross_validation_and_raises_balanced_accuracy() -> None:
    flag_at, weights, before, after = fit_calibration(_synthetic(90))
    assert weights is None and flag_at is not None and 0.35 < flag_at < 0.6
    assert before == 0.5 and after > 0.75
    # the reported figure is out-of-fold: never above what a fit on everything reaches
    assert after <= fit_calibration(_synthetic(90), folds=len(_synthetic(90)) // 3)[3] + 0.1


def test_an_unverified_response_stays_wrong_after_calibration() -> None:
    scored = _synthetic(60) + [Scored(True, "unverified", None)] * 10
    _, _, before, after = fit_calibration(scored)
    assert after < 1.0 and before < after


@pytest.mark.parametrize(("labels", "match"), [
    ([True, False] * 5, "at least 20"),
    ([False] * 40, "every example is labelled faithful"),
    ([True] * 3 + [False] * 40, "at least 5 examples of each label"),
])
def test_data_that_cannot_calibrate_is_refused(labels: list[bool], match: str) -> None:
    with pytest.raises(InputError, match=match):
        refuse_unusable(labels, 5)


def test_scores_are_needed(tmp_path: Path) -> None:
    scored = [Scored(i % 2 == 0, "supported", None) for i in range(MIN_EXAMPLES * 2)]
    with pytest.raises(InputError, match="log-probabilities"):
        fit_calibration(scored)


def _calibrate(tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str], *extra: str
               ) -> tuple[int, str, str]:
    code = cli.main(["calibrate", "--file", str(data), "--llm", "reading", "--out",
                     str(tmp_path / "cal.json"), "--cache-dir", str(tmp_path / "cache"), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
def test_calibrate_writes_a_file_every_front_door_applies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _calibrate(tmp_path, _labelled(tmp_path / "mine.jsonl", 30), capsys)
    assert code == 0
    assert "balanced accuracy before:" in out and "cross-validated" in out
    stored = json.loads((tmp_path / "cal.json").read_text())
    assert stored["format"] == "conli-calibration-1" and stored["examples"] == 30
    assert stored["detectors"][-3:] == ["fused", "coverage_overlap", "coverage_nli"]
    assert 0.0 <= stored["balanced_accuracy_after"] <= 1.0
    checker = Checker(Settings(llm="reading", calibration=tmp_path / "cal.json", judge=False,
                               mitigate=False))
    result = checker.check(SOURCE, "The library opened in 1921. It holds 90,000 books.")
    assert result.calibration is not None and result.calibration.file.endswith("cal.json")
    assert result.calibration.method == stored["method"]


@pytest.mark.slow
def test_a_calibration_for_another_set_up_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _calibrate(tmp_path, _labelled(tmp_path / "mine.jsonl", 30), capsys)[0] == 0
    with pytest.raises(ConfigError, match="fitted for detectors"):
        Checker(Settings(llm="reading", detectors=["cot"], calibration=tmp_path / "cal.json"))
    stored = json.loads((tmp_path / "cal.json").read_text())
    (tmp_path / "other.json").write_text(json.dumps({**stored, "model": "another.gguf"}))
    (tmp_path / "s.txt").write_text(SOURCE)
    (tmp_path / "r.txt").write_text("The library opened in 1921.")
    assert cli.main(["check", "--source", str(tmp_path / "s.txt"), "--response",
                     str(tmp_path / "r.txt"), "--llm", "reading", "--calibration",
                     str(tmp_path / "other.json")]) == 2
    assert "fitted for model 'another.gguf'" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text('{"format": "conli-calibration-1"}')
    with pytest.raises(ConfigError, match="is not a conli calibration"):
        Checker(Settings(llm="reading", calibration=tmp_path / "broken.json"))


@pytest.mark.parametrize(("n", "every", "message"), [
    (12, 2, "at least 20 labelled examples"),
    (30, 1, "every example is labelled hallucinated"),
])
def test_refusals_exit_2_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], n: int, every: int, message: str
) -> None:
    code = cli.main(["calibrate", "--file", str(_labelled(tmp_path / "d.jsonl", n,
                                                          hallucinated_every=every)),
                     "--llm", "reading", "--out", str(tmp_path / "cal.json"), "--no-cache"])
    assert code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "cal.json").exists()


@pytest.mark.slow
def test_a_detector_without_scores_cannot_be_calibrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _calibrate(tmp_path, _labelled(tmp_path / "d.jsonl", 30), capsys,
                              "--detector", "cot")
    assert code == 2 and "log-probabilities" in err
    assert not (tmp_path / "cal.json").exists()


def _by_hand(tmp_path: Path, flag_at: float) -> Path:
    names = ["sentence_nli", "entity_nli", "fused", "coverage_overlap", "coverage_nli"]
    record = calibration_record(backend="reading", model="tiny", detectors=names,
                                nli_prompt="v3", fitted=(flag_at, None, 0.5, 0.8),
                                labels=[True, False], data=b"x", folds=5)
    path = tmp_path / f"cut-{flag_at}.json"
    path.write_text(record.model_dump_json())
    return path


def test_the_cut_decides_each_sentence_and_says_so(tmp_path: Path) -> None:
    plain = SignalModel(version="fused.test", features=("nli_flagged",), mean=(0.0,),
                        scale=(1.0,), coef=(4.0,), intercept=-2.0, threshold=0.5,
                        band=(0.5, 1.0))  # NLI's flag decides: P = 0.12 or 0.88
    (tmp_path / "fused.json").write_text(json.dumps(plain.to_json()))

    def check(flag_at: float | None) -> CheckResult:
        return Checker(Settings(
            llm="reading", fused_model=tmp_path / "fused.json", judge=False, mitigate=False,
            calibration=None if flag_at is None else _by_hand(tmp_path, flag_at),
        )).check(SOURCE, "The library opened in 1921. It holds 90,000 books.")

    assert [s.verdict for s in check(None).sentences] == ["supported", "hallucinated"]
    strict = check(0.1)
    assert [s.verdict for s in strict.sentences] == ["hallucinated", "hallucinated"]
    assert strict.sentences[0].detector == "calibration"
    assert "P(unsupported) = 0.12 is at or above the calibrated cut 0.10" in \
        strict.sentences[0].reasons[0]
    assert strict.sentences[1].detector == "fused"  # flagged anyway: its own reason stays
    lenient = check(0.9)
    assert lenient.sentences[0].verdict == "supported"
    # no cut passes a number the source never states (90,000 books; it says 40,000)
    assert lenient.sentences[1].detector == "unstated_entities"
    assert lenient.calibration is not None and lenient.calibration.flag_at == 0.9


@pytest.mark.slow
def test_a_calibration_that_does_not_beat_the_shipped_decision_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the same response labelled both ways: no cut can beat the shipped decision
    lines = [json.dumps({"id": f"x{i}", "source": SOURCE, "label": i % 2 == 0,
                         "response": "The library opened in 1921. It holds 40,000 books."})
             for i in range(30)]
    (tmp_path / "noise.jsonl").write_text("\n".join(lines) + "\n")
    code, _, err = _calibrate(tmp_path, tmp_path / "noise.jsonl", capsys)
    assert code == 0 and "does not beat the shipped one" in err
    # and a calibration that gains says nothing of the kind
    code, _, err = _calibrate(tmp_path, _labelled(tmp_path / "mine.jsonl", 30), capsys)
    assert code == 0 and "does not beat" not in err
