"""Judge modes register by name, as detectors do: a user's own mode scores through ``Checker``,
its name is a ``--judge-mode`` choice, and an unknown name is refused before any model call."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from conli import judges
from conli.backends.fake import ScriptedBackend
from conli.cli.flags import add_judge_mode_flag
from conli.config import Settings
from conli.errors import ConfigError
from conli.judges import Judged, JudgeTask, Unscored, unscored_result
from conli.models import JudgeResult
from conli.pipeline import Checker
from conli.run.plan import make_plan
from tests.support import plugins
from tests.support.responders import rule_responder

SOURCE = "The library opened in 1962. It lends books free of charge. It has three floors."
RESPONSE = "The library opened in 1962. It charges two dollars a book. It has three floors."
FAITHFUL = "The library opened in 1962. It lends books free of charge."


class Strict:
    """A text with any flagged sentence scores 1, else 5; no model is asked."""

    name = "strict"

    def judge(self, task: JudgeTask) -> Judged:
        flagged = [s for s in task.sentences if s.checked and s.verdict == "hallucinated"]
        return JudgeResult(status="scored", score=1.0 if flagged else 5.0, mode="grounded",
                           scored_by="verdicts", reasoning=f"{len(flagged)} flagged",
                           template="strict.v1"), []

    def unscored(self, task: JudgeTask, status: Unscored, why: str) -> JudgeResult:
        return unscored_result(status, why, "grounded", "strict.v1")


@pytest.fixture
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    """``strict`` registered for this test only."""
    monkeypatch.setattr(judges, "_REGISTRY", dict(judges._REGISTRY))
    judges.register("strict", Strict())


PLUGIN = '''
from conli.judges import unscored_result
from conli.models import JudgeResult


class Lenient:
    """Every checked text scores 4.5; no model is asked."""

    name = "lenient"

    def judge(self, task):
        return JudgeResult(status="scored", score=4.5, mode="grounded", template="lenient.v1"), []

    def unscored(self, task, status, why):
        return unscored_result(status, why, "grounded", "lenient.v1")
'''


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``conli_lenient`` installed: a module and its dist-info naming the mode's class."""
    plugins.install(tmp_path, monkeypatch, "conli_lenient", PLUGIN, "conli.judge_modes",
                    "lenient = conli_lenient:Lenient")
    # a fresh registry that has not read the entry points yet, restored afterwards
    monkeypatch.setattr(judges, "_REGISTRY", dict(judges._REGISTRY))
    monkeypatch.setattr(judges, "_LOADED_ENTRY_POINTS", False)


def _checker(mode: str, bad: tuple[str, ...] = ("two dollars",)) -> Checker:
    return Checker(Settings(judge_mode=mode, word_scores="off", mitigate=False),
                   backend=ScriptedBackend(responder=rule_responder(bad=bad)))


@pytest.mark.usefixtures("strict")
def test_a_registered_judge_mode_scores_through_the_checker() -> None:
    with _checker("strict") as checker:
        flagged = checker.check(SOURCE, RESPONSE)
        passed = checker.check(SOURCE, FAITHFUL)
    assert flagged.verdict == "hallucinated"
    judged = flagged.judge_refined
    assert judged is not None and judged.score == 1.0 and judged.reasoning == "1 flagged"
    assert judged.template == "strict.v1"
    assert judged.audit is not None and judged.audit.template == "strict.v1"  # audited as any
    assert [row.verdict for row in judged.audit.sentences].count("hallucinated") == 1
    assert passed.judge_refined is not None and passed.judge_refined.score == 5.0


@pytest.mark.usefixtures("strict")
def test_a_registered_judge_mode_is_never_asked_to_score_an_emptied_text() -> None:
    with Checker(Settings(judge_mode="strict", word_scores="off"),
                 backend=ScriptedBackend(responder=rule_responder(bad=("1962",)))) as checker:
        emptied = checker.check(SOURCE, "The library opened in 1962.")  # the rewrite removes it
    assert emptied.judge_refined is not None and emptied.judge_refined.status == "emptied"
    assert emptied.judge_refined.score is None and emptied.judge_refined.template == "strict.v1"


@pytest.mark.usefixtures("strict")
def test_the_judge_mode_flag_offers_every_registered_mode() -> None:
    parser = argparse.ArgumentParser()
    add_judge_mode_flag(parser)
    assert parser.parse_args(["--judge-mode", "strict"]).judge_mode == "strict"
    assert set(judges.names()) == {"both", "grounded", "rubric", "strict"}


@pytest.mark.usefixtures("installed")
def test_an_installed_package_s_judge_mode_is_found_by_its_entry_point() -> None:
    assert "lenient" in judges.names()
    with _checker("lenient") as checker:
        judged = checker.check(SOURCE, RESPONSE).judge_refined
    assert judged is not None and judged.score == 4.5 and judged.template == "lenient.v1"


def test_an_unknown_judge_mode_is_a_config_error_naming_the_registered_ones() -> None:
    with pytest.raises(ConfigError) as refused:
        _checker("vibes")
    message = str(refused.value)
    assert "judge_mode" in message and "'vibes'" in message
    assert "registered: both, grounded, rubric" in message
    with pytest.raises(ConfigError, match="unknown judge mode 'vibes'"):
        Checker(make_plan(Settings(judge_mode="vibes")))  # refused before a backend is built


def test_the_built_in_modes_are_registered_under_their_names() -> None:
    assert {"grounded", "rubric", "both"} <= set(judges.names())
    assert all(judges.get(name).name == name for name in ("grounded", "rubric", "both"))
