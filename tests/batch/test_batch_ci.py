"""``conli batch`` in CI (issue 54): the failing ids named, JUnit XML, and a threshold on a
backend that answers without log-probabilities said for what it is. Through the CLI's main."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from conli.backends import register_backend
from conli.backends.fake import ScriptedBackend
from conli.cli.app import main
from tests.support import scripted

SOURCE = "The library opened in 1962. It lends books free of charge."
BAD = "The library opened in 1962. It charges FALSE two dollars."
GOOD = "The library opened in 1962."


@pytest.fixture(autouse=True)
def backends() -> None:
    register_backend("fake", lambda _arg, _settings: scripted.backend())
    # an OpenAI-compatible gateway that says it gives log-probabilities, then drops them
    register_backend("droplogprobs", lambda _arg, _settings: ScriptedBackend(
        responder=scripted.responder(), judges_batches=True, logprobs=5))


def _batch(tmp_path: Path, records: list[dict[str, Any]], *flags: str,
           llm: str = "fake") -> tuple[int, Path]:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    code = main(["batch", str(src), str(out), "--mode", "check", "--llm", llm,
                 "--no-progress", *flags])
    return code, out


def test_a_failed_gate_names_the_first_20_failing_ids_and_counts_the_rest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = [{"id": f"bad-{i:02}", "source": SOURCE, "response": BAD} for i in range(25)]
    records.insert(3, {"id": "good", "source": SOURCE, "response": GOOD})
    code, _ = _batch(tmp_path, records, "--fail-on", "hallucinated")
    assert code == 4
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if "failing id(s)" in x]
    assert line == ("conli: 25 failing id(s): "
                    + ", ".join(f"bad-{i:02}" for i in range(20)) + " ... and 5 more")
    assert "good" not in line


def test_junit_has_a_testcase_a_record_with_failures_and_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "reports" / "conli.xml"
    junit.parent.mkdir()
    records = [{"id": "good", "source": SOURCE, "response": GOOD},
               {"id": "bad", "source": SOURCE, "response": BAD},
               {"id": 7, "source": SOURCE, "response": "   "}]  # fails to run: empty
    code, _ = _batch(tmp_path, records, "--junit", str(junit))
    assert code == 1  # a record failed to run; no --fail-on: the usual codes stand
    root = ElementTree.parse(junit).getroot()
    assert root.tag == "testsuites"
    (suite,) = root
    assert suite.tag == "testsuite"
    assert {k: suite.get(k) for k in ("tests", "failures", "errors")} == {
        "tests": "3", "failures": "1", "errors": "1"}
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert list(cases) == ["good", "bad", "7"]
    assert list(cases["good"]) == []  # passed
    (failure,) = cases["bad"]
    assert failure.tag == "failure" and failure.get("type") == "hallucinated"
    assert "verdict hallucinated: sentence 1 'It charges FALSE two dollars.'" in \
        str(failure.get("message"))
    (error,) = cases["7"]
    assert error.tag == "error" and error.get("type") == "EmptyInputError"
    assert "empty" in str(error.get("message"))


@pytest.mark.parametrize("flag", ["--junit", "--summary"])
def test_a_report_on_an_unwritable_path_is_refused_before_any_model_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    code, out = _batch(tmp_path, [{"id": "a", "source": SOURCE, "response": GOOD}],
                       flag, str(tmp_path / "a-file" / "reports" / "conli.xml"))
    assert code == 2 and not out.exists()
    assert "'a-file' is not a folder" in capsys.readouterr().err.replace(str(tmp_path) + "/", "")


@pytest.mark.parametrize("flag", ["--junit", "--summary"])
def test_a_report_in_a_folder_not_yet_made_is_written_there(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str) -> None:
    """cli.md's own example (``--junit reports/conli.xml``) on a fresh clone."""
    target = tmp_path / "reports" / "nightly" / "conli.out"
    code, _ = _batch(tmp_path, [{"id": "a", "source": SOURCE, "response": GOOD}],
                     flag, str(target))
    assert code == 0 and target.stat().st_size > 0


def test_a_threshold_on_a_backend_that_drops_log_probabilities_says_why_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "conli.xml"
    records = [{"id": f"ok-{i}", "source": SOURCE, "response": GOOD} for i in range(3)]
    code, out = _batch(tmp_path, records, "--threshold", "0.7", "--fail-on", "hallucinated",
                       "--junit", str(junit), llm="droplogprobs")
    assert code == 4
    stored = [json.loads(line)["result"] for line in out.read_text("utf-8").splitlines()]
    assert {r["verdict"] for r in stored} == {"supported"}
    assert {r["score_method"] for r in stored} == {"verdict"}
    err = capsys.readouterr().err
    warnings = [x for x in err.splitlines() if "warning" in x]
    assert len(warnings) == 1 and "without log-probabilities" in warnings[0]
    assert "3 supported record(s) failed threshold 0.7" in warnings[0]
    assert "failed 3 (3 supported, without a score that ranks)" in err
    messages = [f.get("message") or "" for f in ElementTree.parse(junit).getroot().iter("failure")]
    assert len(messages) == 3 and all("without log-probabilities" in m for m in messages)


def test_junit_needs_check_or_rewrite_mode(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "source": SOURCE, "response": GOOD}) + "\n", "utf-8")
    code = main(["batch", str(src), str(tmp_path / "out.jsonl"), "--mode", "judge",
                 "--llm", "fake", "--no-progress", "--junit", str(tmp_path / "j.xml")])
    assert code == 2 and "--junit" in capsys.readouterr().err
