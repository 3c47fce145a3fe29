"""The judge as users get it: grounded by default, the rubric bounded by detection, ``both``
marking disagreements for review, an emptied rewrite never a 5, and the audit record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.judges.grounded import load_scale
from conli.pipeline import Checker
from conli.run.doors import JudgeOnlyResult
from conli.run.plan import RunOptions
from conli.run.request import RunRequest
from tests.support.paths import ROOT
from tests.support.responders import REASONING, kind_of, rule_responder

SOURCE = "The library opened in 1962. It lends books free of charge. It has three floors."
RESPONSE = "The library opened in 1962. It charges two dollars a book. It has three floors."
FAITHFUL = "The library opened in 1962. It lends books free of charge. It has three floors."


def _rubric_says(score: int, bad: tuple[str, ...] = ("two dollars",)) -> Any:
    """Detection flags sentences holding ``bad``; the rubric judge always answers ``score``."""
    nli = rule_responder(bad=bad)

    def respond(messages: list[Any]) -> str:
        kind = kind_of(messages)
        if kind == "judge":
            return json.dumps({"errors": [], "score": score})
        if kind == "reasoning":
            return REASONING
        return nli(messages)

    return respond


def _judged(respond: Any, mode: str, response: str = RESPONSE) -> Any:
    checker = Checker(Settings(judge_mode=mode, word_scores="off"),  # type: ignore[arg-type]
                      backend=ScriptedBackend(responder=respond))
    request = RunRequest.of(SOURCE, response, limits=checker.settings,
                            options=RunOptions.for_mode("judge"))
    try:
        judged = checker.run_judge(request)
        assert isinstance(judged, JudgeOnlyResult)
        return judged.judge
    finally:
        checker.close()


def test_the_default_judge_is_grounded() -> None:
    assert Settings().judge_mode == "grounded"


def test_a_rubric_five_on_a_text_with_a_flagged_sentence_is_bounded_and_says_why() -> None:
    judged = _judged(_rubric_says(5), "rubric")
    assert judged.mode == "rubric" and judged.score == 4.0 and judged.bounded_from == 5.0
    assert judged.note is not None and "It charges two dollars a book." in judged.note


def test_a_rubric_score_on_a_text_detection_passes_is_not_bounded() -> None:
    judged = _judged(_rubric_says(5, bad=()), "rubric", FAITHFUL)
    assert judged.score == 5.0 and judged.bounded_from is None


def test_both_marks_a_disagreement_of_two_or_more_for_review() -> None:
    judged = _judged(_rubric_says(5), "both")
    assert judged.mode == "grounded" and judged.score == load_scale()(0.75 / 3)
    assert judged.second_opinion is not None and judged.second_opinion.mode == "rubric"
    assert judged.second_opinion.score == 4.0  # bounded: the rubric said 5
    assert any("scored 5.0 although detection flagged" in why for why in judged.review)
    agreeing = _judged(_rubric_says(5, bad=()), "both", FAITHFUL)
    assert agreeing.score == 5.0 and agreeing.second_opinion is not None
    assert agreeing.review == []


def test_both_marks_a_gap_of_two_even_when_no_bound_applies() -> None:
    """The grounded judge finds two of three sentences unsupported; the rubric says 4."""
    respond = _rubric_says(4, bad=("two dollars", "three floors"))
    judged = _judged(respond, "both")
    assert judged.score is not None and judged.second_opinion is not None
    assert judged.second_opinion.score == 4.0 and judged.second_opinion.bounded_from is None
    assert 4.0 - judged.score >= 2
    assert any("differ by" in why for why in judged.review)


def test_an_emptied_response_is_shown_as_emptied_never_a_five() -> None:
    nli = rule_responder(bad=("two dollars", "1962", "three floors"))  # every sentence flagged
    checker = Checker(Settings(word_scores="off"), backend=ScriptedBackend(responder=nli))
    try:
        result = checker.check(SOURCE, RESPONSE)
    finally:
        checker.close()
    assert result.refined_text.strip() == ""
    refined = result.judge_refined
    assert refined is not None and refined.status == "emptied" and refined.score is None
    assert result.judge_raw is not None and result.judge_raw.score is not None
    assert result.judge_raw.score < 2


def test_the_audit_record_ties_each_sentence_to_its_offsets_and_source_span() -> None:
    judged = _judged(_rubric_says(5), "grounded")
    audit = judged.audit
    assert audit is not None
    assert (audit.backend, audit.model) == ("fake", "scripted")
    assert audit.detectors and audit.template.startswith("findings.v1+")  # no prompt: written
    assert audit.judged_at.endswith("+00:00") and audit.conli_version
    rows = {row.text: row for row in audit.sentences}
    for row in audit.sentences:
        assert RESPONSE[row.start:row.end] == row.text
    flagged = rows["It charges two dollars a book."]
    assert (flagged.verdict, flagged.severity) == ("hallucinated", "unsupported")
    assert flagged.relation == "no_span_found" and flagged.source_span is None
    assert flagged.reason


def test_a_supported_sentence_names_the_source_span_it_rests_on() -> None:
    def respond(messages: list[Any]) -> str:
        if kind_of(messages) == "nli":
            claim = messages[-1]["content"]
            quote = "It has three floors" if "three floors" in claim else "opened in 1962"
            return json.dumps({"evidence": quote, "reasoning": "stated", "label": "entailment"})
        return REASONING

    judged = _judged(respond, "grounded", "The library opened in 1962. It has three floors.")
    assert judged.audit is not None
    row = judged.audit.sentences[1]
    assert row.relation == "supports" and row.source_span is not None
    span = row.source_span
    assert SOURCE[span.start:span.end] == span.text == "It has three floors"


@pytest.mark.integration
def test_conli_judge_json_names_the_mode_and_scores_each_candidate(tmp_path: Path) -> None:
    src, good, bad = tmp_path / "s.txt", tmp_path / "good.txt", tmp_path / "bad.txt"
    src.write_text("The library opened in 1962. It lends books free of charge.", "utf-8")
    good.write_text("The library opened in 1962.", "utf-8")
    bad.write_text("The library opened in 1962. It charges FALSE two dollars.", "utf-8")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONLI_")}
    environment.update({"CONLI_TEST_FAKE": "1", "PYTHONPATH": str(ROOT)})
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.cli_runner", "judge", "--source", str(src),
         "--response", str(good), "--response", str(bad), "--llm", "fake", "--json"],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["judge_mode"] == "grounded"
    scores = [text["judge"]["score"] for text in out["texts"]]
    assert scores[0] == 5.0 and scores[1] < 3
    assert [text["response"] for text in out["texts"]] == [str(good), str(bad)]
    assert out["texts"][1]["judge"]["audit"]["sentences"][1]["verdict"] == "hallucinated"


def test_a_text_whose_every_sentence_could_not_be_checked_is_unverified_not_scored() -> None:
    def garbage(messages: list[Any]) -> str:
        return REASONING if kind_of(messages) == "reasoning" else "not an answer"

    judged = _judged(garbage, "grounded")
    assert judged.status == "unverified" and judged.score is None
    assert judged.error is not None and "could be checked" in judged.error


@pytest.mark.integration
def test_every_cli_front_door_takes_judge_mode(tmp_path: Path) -> None:
    """``check`` and ``batch`` take ``--judge-mode`` as ``judge`` does, and record it."""
    src, resp = tmp_path / "s.txt", tmp_path / "r.txt"
    src.write_text(SOURCE, "utf-8")
    resp.write_text("The library opened in 1962. It charges FALSE two dollars.", "utf-8")
    (tmp_path / "in.jsonl").write_text(json.dumps(
        {"id": "a", "source": SOURCE, "response": resp.read_text()}) + "\n")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONLI_")}
    environment.update({"CONLI_TEST_FAKE": "1", "PYTHONPATH": str(ROOT)})

    def conli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tests.support.cli_runner", *args, "--llm",
                               "fake"], cwd=ROOT, env=environment, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)

    checked = conli("check", "--source", str(src), "--response", str(resp), "--json",
                    "--judge-mode", "rubric")
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["judge_refined"]["mode"] == "rubric"
    batched = conli("batch", str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl"),
                    "--mode", "judge", "--judge-mode", "both", "--no-progress")
    assert batched.returncode == 0, batched.stderr
    judged = json.loads((tmp_path / "out.jsonl").read_text())["result"]["judge"]
    assert judged["mode"] == "grounded" and judged["second_opinion"]["mode"] == "rubric"
