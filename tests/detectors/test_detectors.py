"""The detector contract: a new detector is one module and one registration line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tests.support.word_detector  # registers the "word" detector
from conli import detectors
from conli.backends import register_backend
from conli.backends.fake import ScriptedBackend
from conli.cli import app as cli
from conli.config import Settings
from conli.errors import ConfigError
from conli.pipeline import Checker
from conli.run.plan import make_plan
from tests.support.responders import rule_responder

SOURCE = "The library opened in 1962. It lends books free of charge."
RESPONSE = "The library opened in 1962. It charges a FALSE fee per book."


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    register_backend("fake", lambda arg, s: ScriptedBackend(responder=rule_responder()))
    (tmp_path / "s.txt").write_text(SOURCE)
    (tmp_path / "r.txt").write_text(RESPONSE)
    return ["check", "--source", str(tmp_path / "s.txt"), "--response", str(tmp_path / "r.txt"),
            "--llm", "fake", "--no-mitigate", "--no-judge", "--json", "--quiet"]


def test_a_registered_detector_runs_from_the_cli(files: list[str], capsys) -> None:
    assert cli.main([*files, "--detector", "word"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [s["verdict"] for s in result["sentences"]] == ["supported", "hallucinated"]
    assert result["sentences"][1]["detector"] == "word"
    assert result["usage"]["calls"] == 0  # no model was asked


def test_detectors_run_in_order_and_their_judgements_merge(files: list[str], capsys) -> None:
    assert cli.main([*files, "--detector", "word", "--detector", "cot"]) == 0
    result = json.loads(capsys.readouterr().out)
    second = result["sentences"][1]
    assert [j["detector"] for j in second["judgements"]][:2] == ["word", "sentence_nli"]
    assert second["verdict"] == "hallucinated"  # the word flags it, NLI passes it: flagged
    assert result["usage"]["calls"] > 0


def test_unknown_detector_lists_the_known_ones(files: list[str], capsys) -> None:
    assert cli.main([*files, "--detector", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown detector 'nope'" in err and "word" in err and "sentence_nli" in err


def test_presets_expand_and_the_level_switches_apply() -> None:
    cover = ["coverage_overlap", "coverage_nli"]  # presets judge points when given some
    assert detectors.resolve(Settings(detectors=["cot"])) == ["sentence_nli", "entity_nli",
                                                               *cover]
    assert detectors.resolve(Settings(detectors=["cot"], entity_level=False)) == [
        "sentence_nli", *cover]
    assert detectors.resolve(Settings(detectors=["fused"])) == [
        "sentence_nli", "entity_nli", "fused", *cover]
    assert detectors.resolve(Settings(detectors=["fast"])) == ["signals", "coverage_overlap"]
    assert detectors.resolve(Settings(detectors=["word", "cot", "word"])) == [
        "word", "sentence_nli", "entity_nli", *cover]
    with pytest.raises(ConfigError):
        detectors.resolve(Settings(detectors=["entity_nli"], entity_level=False))


def test_a_superseding_detector_decides_where_both_judged() -> None:
    class SecondOpinion(tests.support.word_detector.WordDetector):
        name = "second"
        supersedes = frozenset({"word"})

    detectors.register("second", lambda: SecondOpinion(word="charges"))
    settings = Settings(detectors=["word", "second"], mitigate=False, judge=False)
    checker = Checker(settings, backend=ScriptedBackend())
    (first, second) = checker.check(SOURCE, RESPONSE).sentences
    assert second.verdict == "hallucinated" and second.detector == "second"
    assert first.verdict == "supported"
    settings = Settings(detectors=["word", "second"], mitigate=False, judge=False)
    result = Checker(settings, backend=ScriptedBackend()).check(
        SOURCE, "It lends books FALSE free of charge.")
    assert result.sentences[0].verdict == "supported"  # "second" overrules "word" here


def test_per_call_settings_cannot_change_what_the_checker_built() -> None:
    checker = Checker(Settings(judge=False), backend=ScriptedBackend(responder=rule_responder()))
    with pytest.raises(ConfigError, match="llm"):
        checker.check(SOURCE, RESPONSE, plan=make_plan(Settings(llm="openai:gpt-4o-mini")))
    found = checker.check(SOURCE, RESPONSE, plan=make_plan(Settings(
        judge=False, mitigate=False, detectors=["word"])))
    with pytest.warns(DeprecationWarning, match="plan="):  # the old spelling still works
        again = checker.check(SOURCE, RESPONSE, settings=Settings(
            judge=False, mitigate=False, detectors=["word"]))
    assert again.sentences[1].detector == "word"
    assert found.sentences[1].detector == "word"
