"""A score on every backend, with how it was made; a threshold only where scores rank."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.errors import ConfigError
from conli.pipeline import Checker
from tests.support import scripted
from tests.support.paths import ROOT
from tests.support.readers import ReadingBackend

SOURCE = "The library opened in 1962. It lends books free of charge."
RESPONSE = "The library opened in 1962. It charges FALSE two dollars."
BASE = {"detectors": ["cot"], "mitigate": False, "judge": False, "word_scores": "off"}


def _check(backend: ScriptedBackend, **more: object) -> Checker:
    return Checker(Settings(**{**BASE, **more}), backend=backend)  # type: ignore[arg-type]


def test_without_log_probabilities_every_sentence_has_its_verdict_as_score() -> None:
    with _check(scripted.backend()) as checker:
        result = checker.check(SOURCE, RESPONSE)
    assert [(s.score, s.score_method) for s in result.sentences] == [
        (1.0, "verdict"), (0.0, "verdict")]
    assert (result.support_score, result.score_method) == (0.0, "verdict")


def test_several_looks_without_log_probabilities_score_their_share() -> None:
    with _check(scripted.backend(), nli_looks=3) as checker:
        result = checker.check(SOURCE, RESPONSE)
    assert [(s.score, s.score_method) for s in result.sentences] == [
        (1.0, "looks"), (0.0, "looks")]
    assert result.score_method == "looks"


def test_a_trained_detectors_probability_is_a_classifier_score() -> None:
    with Checker(Settings(llm="reading", judge=False, mitigate=False, word_scores="off"),
                 backend=ReadingBackend()) as checker:
        result = checker.check(SOURCE, RESPONSE)
    assert result.score_method == "classifier"
    assert all(s.score_method == "classifier" for s in result.sentences)


def test_a_threshold_on_verdict_scores_is_refused_before_any_model_call() -> None:
    backend = scripted.backend()
    with pytest.raises(ConfigError, match="reports no log-probabilities") as refused:
        _check(backend, threshold=0.5)
    assert "CONLI_NLI_LOOKS=3" in str(refused.value)
    assert backend.calls == []
    with _check(backend, threshold=0.5, nli_looks=3) as checker:  # the share ranks
        assert checker.check(SOURCE, "The library opened in 1962.").passed


@pytest.mark.integration
def test_the_cli_refuses_the_threshold_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "s.txt").write_text(SOURCE, "utf-8")
    (tmp_path / "r.txt").write_text(RESPONSE, "utf-8")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONLI_")}
    environment.update({"CONLI_TEST_FAKE": "1", "PYTHONPATH": str(ROOT)})
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.cli_runner", "check", "--source",
         str(tmp_path / "s.txt"), "--response", str(tmp_path / "r.txt"), "--llm", "fake",
         "--threshold", "0.4"],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "reports no log-probabilities" in done.stderr


@pytest.mark.integration
def test_the_service_refuses_a_threshold_it_cannot_score() -> None:
    httpx = pytest.importorskip("httpx")
    from tests.support.service import AUTH, KEY, serving

    body = {"source": SOURCE, "response": RESPONSE, "options": {"threshold": 0.5}}
    with serving(Settings(service_api_keys=[KEY])) as url:
        answer = httpx.post(f"{url}/v1/check", json=body, headers=AUTH)
    assert 400 <= answer.status_code < 500 and "log-probabilities" in answer.text
