"""A judge score rests on checked sentences or is not given (issue 52.1).

A backend whose NLI answers never validate leaves every sentence ``unverified``: no judge
mode scores that text (the rubric judge used to give it 5.0), a text with some sentences
unverified says so in its note and in ``review``, and a judge-mode batch on such a backend
stops with exit 3 as a check-mode batch does.
"""

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
from conli.models import JudgeResult
from conli.pipeline import Checker
from conli.run.doors import JudgeOnlyResult
from conli.run.plan import RunOptions
from conli.run.request import RunRequest
from tests.support.paths import ROOT
from tests.support.responders import REASONING, claims_of, kind_of, rule_responder

SOURCE = "The library opened in 1962. It lends books free of charge. It has three floors."
RESPONSE = "The library opened in 1962. It lends books free of charge. It has three floors."
GARBAGE = "<html><body>Welcome to nginx!</body></html>"


def _respond(garbled: tuple[str, ...] | None) -> Any:
    """The judges answer 5 as asked; NLI answers garbage on claims holding ``garbled``
    (every claim when None), and entailment on the rest."""
    nli = rule_responder()

    def respond(messages: list[Any]) -> str:
        kind = kind_of(messages)
        if kind == "judge":
            return json.dumps({"errors": [], "score": 5})
        if kind == "reasoning":
            return REASONING
        claims = " ".join(claims_of(messages))
        if garbled is None or any(g in claims for g in garbled):
            return GARBAGE
        return nli(messages)

    return respond


def _judged(garbled: tuple[str, ...] | None, mode: str) -> tuple[JudgeResult, ScriptedBackend]:
    backend = ScriptedBackend(responder=_respond(garbled))
    checker = Checker(Settings(judge_mode=mode, word_scores="off"),  # type: ignore[arg-type]
                      backend=backend)
    request = RunRequest.of(SOURCE, RESPONSE, limits=checker.settings,
                            options=RunOptions.for_mode("judge"))
    try:
        judged = checker.run_judge(request)
        assert isinstance(judged, JudgeOnlyResult)
        return judged.judge, backend
    finally:
        checker.close()


@pytest.mark.parametrize("mode", ["rubric", "grounded", "both"])
def test_no_judge_mode_scores_a_text_none_of_whose_sentences_was_checked(mode: str) -> None:
    judged, backend = _judged(None, mode)
    assert judged.status == "unverified" and judged.score is None
    assert judged.error is not None and "no sentence of the text could be checked" in judged.error
    assert "invalid answer" in judged.error
    assert not any(kind_of(call) == "judge" for call in backend.calls)  # nobody asked for a 5
    if mode == "both":
        assert judged.review and "no judge scored the text" in judged.review[0]


@pytest.mark.parametrize("mode", ["rubric", "grounded", "both"])
def test_a_score_with_some_sentences_unverified_says_so(mode: str) -> None:
    judged, _ = _judged(("three floors",), mode)
    assert judged.status == "scored" and judged.score is not None
    assert judged.note is not None and "1 of 3 sentences could not be checked" in judged.note
    if mode == "both":
        assert any("1 of 3 sentences could not be checked" in why for why in judged.review)
        assert judged.second_opinion is not None and judged.second_opinion.note is not None
        assert "1 of 3 sentences" in judged.second_opinion.note


def _conli(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONLI_")}
    path = f"{ROOT / 'src'}{os.pathsep}{ROOT}"  # this tree's conli, not the installed one
    environment.update({"CONLI_TEST_FAKE": "1", "PYTHONPATH": path})
    return subprocess.run([sys.executable, "-m", "tests.support.batch_runner", *args], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL)


@pytest.mark.integration
def test_conli_check_and_judge_show_an_unchecked_text_unscored(tmp_path: Path) -> None:
    src, resp = tmp_path / "s.txt", tmp_path / "r.txt"
    src.write_text(SOURCE, "utf-8")
    resp.write_text(RESPONSE, "utf-8")
    files = ("--source", str(src), "--response", str(resp), "--llm", "nli-garbage",
             "--judge-mode", "rubric")
    checked = _conli("check", *files)
    assert "judge score, raw: unverified (no sentence of the text could be checked" \
        in checked.stdout, checked.stderr
    assert "5.0" not in checked.stdout and "No statement" not in checked.stdout
    judged = _conli("judge", *files)
    assert judged.returncode == 0, judged.stderr
    assert "unverified (no sentence of the text could be checked" in judged.stdout
    assert "5.0" not in judged.stdout and "No statement" not in judged.stdout


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["rubric", "both"])
def test_a_judge_batch_on_a_backend_whose_nli_never_answers_stops_with_exit_3(
    tmp_path: Path, mode: str,
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"id": f"r{i}", "source": SOURCE, "response": RESPONSE})
                           + "\n" for i in range(8)), "utf-8")
    done = _conli("batch", str(src), str(out), "--llm", "nli-garbage", "--mode", "judge",
                  "--judge-mode", mode, "--no-progress")
    assert done.returncode == 3, done.stderr
    assert "stopped early: the first 5 records all ended unverified" in done.stderr
    rows = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    assert len(rows) == 5 and all(not r["ok"] and r["retryable"] for r in rows)
    assert "score 5" not in done.stderr
