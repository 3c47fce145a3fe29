"""The answer's shape (issue 54): ``supported_share``, rounded scores, several texts judged
over HTTP as ``conli judge --json`` judges them, and reasoning the findings stand behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conli.backends import register_backend
from conli.backends.base import Message
from conli.backends.fake import Reply, ScriptedBackend
from conli.cli.app import main
from conli.config import Settings
from conli.models import CheckResult, SentenceResult
from conli.pipeline import Checker
from tests.support import scripted
from tests.support.responders import rule_responder
from tests.support.service import AUTH, KEY, RESPONSE, SOURCE, serving

GOOD = "The library opened in 1962."


@pytest.fixture
def url() -> Iterator[str]:
    with serving(Settings(_env_file=None, service_api_keys=[KEY])) as base:
        yield base


@pytest.mark.integration
def test_check_results_carry_the_supported_share_over_http(url: str) -> None:
    checked = httpx.post(f"{url}/v1/check", json={"source": SOURCE, "response": RESPONSE},
                         headers=AUTH).json()
    assert checked["supported_share"] == 0.5  # one of two checked sentences is supported
    assert list(checked)[:4] == ["schema_version", "verdict", "support_score", "supported_share"]
    schema = httpx.get(f"{url}/openapi.json").json()["components"]["schemas"]
    assert "supported_share" in schema["CheckResult"]["properties"]


@pytest.mark.integration
def test_several_responses_are_judged_one_result_each_as_the_cli_judges_them(
        url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = [RESPONSE, GOOD]
    served = httpx.post(f"{url}/v1/judge", json={"source": SOURCE, "responses": texts},
                        headers=AUTH)
    assert served.status_code == 200, served.text
    answer = served.json()
    assert answer["judge_mode"] == "grounded"
    assert [t["index"] for t in answer["texts"]] == [0, 1]
    scores = [t["judge"]["score"] for t in answer["texts"]]
    assert scores[0] < 3 and scores[1] == 5

    register_backend("fake", lambda _arg, _settings: scripted.backend())
    source = tmp_path / "source.txt"
    source.write_text(SOURCE, encoding="utf-8")
    names = []
    for i, text in enumerate(texts):
        path = tmp_path / f"r{i}.txt"
        path.write_text(text, encoding="utf-8")
        names += ["--response", str(path)]
    assert main(["judge", "--source", str(source), *names, "--llm", "fake", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["judge_mode"] == answer["judge_mode"]
    for mine, theirs in zip(answer["texts"], cli["texts"], strict=True):
        for key in ("status", "score", "mode", "reasoning", "findings", "errors"):
            assert mine["judge"][key] == theirs["judge"][key]
        assert mine["usage"]["calls"] == theirs["usage"]["calls"]

    one = httpx.post(f"{url}/v1/judge", json={"source": SOURCE, "response": GOOD},
                     headers=AUTH).json()  # one response: one result, as before
    assert one["judge"]["score"] == 5 and "texts" not in one
    for body in ({"source": SOURCE}, {"source": SOURCE, "response": GOOD, "responses": [GOOD]},
                 {"source": SOURCE, "responses": []}):
        refused = httpx.post(f"{url}/v1/judge", json=body, headers=AUTH)
        assert refused.status_code == 422, body
    empty = httpx.post(f"{url}/v1/judge", json={"source": SOURCE, "responses": [GOOD, " "]},
                       headers=AUTH)
    assert empty.status_code == 422 and "empty" in empty.text  # checked before any model call


def test_scores_are_rounded_to_four_places_where_results_are_built() -> None:
    sentence = SentenceResult(index=0, text="x", start=0, end=1, checked=True,
                              verdict="supported", score=0.1 + 0.2 + 0.6300000000000002)
    assert sentence.score == 0.93
    result = Checker(Settings(_env_file=None, mitigate=False, judge=False),
                     backend=ScriptedBackend(responder=rule_responder(bad=("FALSE",)),
                                             logprobs=5, judges_batches=True))
    checked = result.check(SOURCE, RESPONSE)
    floats = [s.score for s in checked.sentences] + [checked.support_score,
                                                     checked.supported_share]
    assert all(f is None or f == round(f, 4) for f in floats)
    assert checked.supported_share == 0.5


def test_supported_share_is_none_when_nothing_was_checked() -> None:
    from conli.gate import supported_share

    heading = SentenceResult(index=0, text="# Notes", start=0, end=7, checked=False)
    assert supported_share([heading]) is None
    unverified = heading.model_copy(update={"checked": True, "verdict": "unverified"})
    assert supported_share([unverified, unverified.model_copy(
        update={"verdict": "supported"})]) == 0.5  # unverified never counts as supported
    assert CheckResult.model_json_schema()["properties"]["supported_share"]


# --- the grounded judge's reasoning: nothing the findings do not say ---------------------

DEMO_SOURCE = ("Millbrook opened a new public swimming pool on Saturday, June 14. The pool cost "
               "2.4 million dollars and was funded by a regional sports grant and local "
               "fundraising. About 800 people visited on the opening day.")
DEMO = ("Millbrook opened a new public swimming pool on Saturday, June 14. The pool cost 4.2 "
        "million dollars and was funded by a regional sports grant and local fundraising. "
        "About 800 people visited on the opening day.")
MODEL_PROSE = (
    "The text states that the pool cost 4.2 million dollars, but the source states 2.4 million "
    "dollars. This discrepancy is a contradiction, as the text claims the pool was funded by a "
    "regional sports grant and local fundraising, while the source states it was funded by a "
    "regional sports grant and local fundraising. The text says 800 people visited on the "
    "opening day, which the source contradicts. This is a neutral finding, as the text quotes "
    "the source but does not")


def test_the_reasoning_leads_with_the_findings_and_keeps_only_the_prose_that_agrees() -> None:
    nli = rule_responder(bad=("4.2",))

    def respond(messages: list[Message]) -> Reply:
        if "You write the reasoning" in messages[0]["content"]:
            return json.dumps({"reasoning": MODEL_PROSE})
        return nli(messages)

    checker = Checker(Settings(_env_file=None, judge_mode="grounded", entity_level=False,
                               mitigate=False, judge_reasoning="model"),
                      backend=ScriptedBackend(responder=respond))
    judged = checker.check(DEMO_SOURCE, DEMO).judge_refined
    assert judged is not None and judged.reasoning_status == "checked"
    assert judged.reasoning_by == "judge_grounded.v1"
    reasoning = judged.reasoning
    assert reasoning.startswith(
        "1 of 3 checked sentences is flagged: 1 is not supported by the source.")
    assert "cost 4.2 million dollars, but the source states 2.4" in reasoning  # agrees: kept
    assert "This discrepancy" not in reasoning  # a supported clause called a contradiction
    assert "800 people" not in reasoning  # speaks of a sentence detection found supported
    assert "does not" not in reasoning and reasoning.endswith(".")  # the cut fragment is gone


def _user_script(tmp_path: Path) -> Path:
    script = tmp_path / "user.py"
    script.write_text('''"""A user's script, as the README shows conli's calls."""

import conli
from conli import Checker, Settings

settings = Settings(llm="openai", judge=False, threshold=0.7, max_concurrency=4)
pairs = [(["The library opened in 1962.", "It is run by the council."], "It opened in 1962."),
         ("The library opened in 1962.", "It opened in 1962.")]
results = conli.score(pairs, settings)
best: float | None = results[0].score
with Checker(Settings(llm="fake", mitigate=False)) as checker:
    result = checker.check("The library opened in 1962.", "It opened in 1962.")
    share: float | None = result.supported_share
''', encoding="utf-8")
    return script


@pytest.mark.integration
def test_user_code_type_checks_under_mypy_strict_without_the_pydantic_plugin(
        tmp_path: Path) -> None:
    """~10-30 s: mypy reads conli (and pydantic) cold; conli's own code is not re-checked."""
    pytest.importorskip("mypy")
    import conli

    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n", encoding="utf-8")  # no plugin: what a user has by default
    src = str(Path(conli.__file__).resolve().parent.parent)  # this checkout's conli
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", str(config),
         "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"),
         str(_user_script(tmp_path))],
        cwd=tmp_path, env={**os.environ, "MYPYPATH": src}, capture_output=True, text=True,
        timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
