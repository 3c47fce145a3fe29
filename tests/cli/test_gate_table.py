"""The gate, table-driven: verdict x threshold x ``--fail-on`` -> exit code, check and batch.

Each row runs the real CLI (``conli.cli.app.main``) in this process on a scripted backend
and the ``scored`` detector (``tests.support.score_detector``: ``scoreNN`` in a sentence is its
score, below 0.5 hallucinated; ``UNSURE`` leaves it unverified). Every response has a
sentence at 0.95 and one at 0.60 / 0.45 / unverified, so a threshold of 0.4 is below
every score (it passes what the verdict passes) and 0.9 is above the second sentence's.
docs/cli.md's gate table is ``GATE_TABLE`` (tests/house/test_docs_pages.py holds the two equal).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tests.support.score_detector  # noqa: F401 - registers the scored detector
from conli import backends
from conli.cli.app import main
from conli.config import Settings
from conli.errors import EXIT_GATE_FAILED
from tests.support import scripted
from tests.support.gate_table import GATE_TABLE

SOURCE = "The library opened in 1962. It lends books free of charge."
RESPONSES = {
    "supported": "It opened in 1962 score95. It lends books score60.",
    "hallucinated": "It opened in 1962 score95. It lends books score45.",
    "unverified": "It opened in 1962 score95. It lends UNSURE books.",
}
THRESHOLDS = {"none": None, "0.4": 0.4, "0.9": 0.9}
FLAGS = ("none", "hallucinated", "unverified")


@pytest.fixture(autouse=True)
def _scripted_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--llm gate`` is a scripted backend; no ``CONLI_*`` of the caller's leaks in."""
    def factory(_arg: str, _settings: Settings) -> backends.Backend:
        return scripted.backend(concurrency=2)

    monkeypatch.setitem(backends._REGISTRY, "gate", factory)
    for name in [n for n in os.environ if n.startswith("CONLI_")]:
        monkeypatch.delenv(name)


def _gate_flags(threshold: str, flag: str) -> list[str]:
    given = [] if threshold == "none" else ["--threshold", threshold]
    return given + ([] if flag == "none" else ["--fail-on", flag])


def test_the_table_covers_every_case() -> None:
    assert {(v, t, f) for v, t, f, _, _ in GATE_TABLE} == {
        (v, t, f) for v in RESPONSES for t in THRESHOLDS for f in FLAGS}
    assert len(GATE_TABLE) == 27


@pytest.mark.parametrize(("verdict", "threshold", "flag", "passed", "code"), GATE_TABLE)
def test_conli_check_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str], verdict: str,
                               threshold: str, flag: str, passed: bool, code: int) -> None:
    src, resp = tmp_path / "source.txt", tmp_path / "response.txt"
    src.write_text(SOURCE, encoding="utf-8")
    resp.write_text(RESPONSES[verdict], encoding="utf-8")
    got = main(["check", "--source", str(src), "--response", str(resp), "--llm", "gate",
                "--detector", "scored", "--no-judge", "--no-mitigate", "--json",
                *_gate_flags(threshold, flag)])
    out, err = capsys.readouterr()
    result = json.loads(out)  # the report is written whatever the gate says
    assert (result["verdict"], result["passed"], got) == (verdict, passed, code), err
    if code == EXIT_GATE_FAILED:
        assert f"--fail-on {flag} failed: " in err and f"verdict {verdict}" in err
    else:
        assert "--fail-on" not in err


@pytest.mark.parametrize(("verdict", "threshold", "flag", "passed", "code"), GATE_TABLE)
def test_conli_batch_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str], verdict: str,
                               threshold: str, flag: str, passed: bool, code: int) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps({"id": 1, "source": SOURCE, "response": RESPONSES[verdict]}) + "\n",
                   encoding="utf-8")
    got = main(["batch", str(src), str(out), "--mode", "check", "--llm", "gate", "--detector",
                "scored", "--no-progress", *_gate_flags(threshold, flag)])
    err = capsys.readouterr().err
    record = json.loads(out.read_text(encoding="utf-8"))
    assert (record["result"]["verdict"], record["result"]["passed"], got) == \
        (verdict, passed, code), err
    counted = {"passed": int(passed), "failed": int(not passed and verdict != "unverified"),
               "unverified": int(verdict == "unverified")}
    assert ("gate: passed {passed} · failed {failed} · unverified {unverified}"
            .format(**counted)) in err
    assert (f"--fail-on {flag} failed" in err) is (code == EXIT_GATE_FAILED)


def test_a_rerun_with_nothing_left_to_do_still_fails_the_gate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"id": verdict, "source": SOURCE, "response": response})
                           + "\n" for verdict, response in RESPONSES.items()), encoding="utf-8")
    run = ["batch", str(src), str(out), "--mode", "check", "--llm", "gate", "--detector",
           "scored", "--no-progress"]
    assert main([*run, "--fail-on", "hallucinated"]) == EXIT_GATE_FAILED
    assert "gate: passed 1 · failed 1 · unverified 1 (verdict supported)" in capsys.readouterr().err
    assert main([*run, "--fail-on", "hallucinated"]) == EXIT_GATE_FAILED  # OUT still holds it
    again = capsys.readouterr().err
    assert "3 already in OUT" in again and "gate: passed 1 · failed 1 · unverified 1" in again
    # earlier records are held to this run's bar: 0.9 fails the supported one too
    assert main([*run, "--threshold", "0.9"]) == 0  # no --fail-on: the gate only counts
    assert "gate: passed 0 · failed 2 · unverified 1 (threshold 0.9)" in capsys.readouterr().err


def test_batch_refuses_a_gate_in_judge_mode(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps({"id": 1, "source": SOURCE, "response": "x"}) + "\n",
                   encoding="utf-8")
    assert main(["batch", str(src), str(out), "--mode", "judge", "--llm", "gate",
                 "--fail-on", "hallucinated", "--no-progress"]) == 2
    assert "need --mode check or rewrite" in capsys.readouterr().err
    assert not out.exists() or out.read_text() == ""
