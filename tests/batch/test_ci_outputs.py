"""CI and nightly outputs beyond JUnit (issue 65 item 3), through the CLI's main.

``conli batch --summary FILE.json`` (counts by verdict, pass rate, mean scores, reasons,
failing ids, timings); GitHub's job summary and ``::error`` annotations when its variables
are set; ``--junit`` with each check's time and every flagged sentence; ``conli diff OLD
NEW`` with verdict flips, new failures, score moves and an exit code to gate on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from conli.backends import register_backend
from conli.cli.app import main
from tests.support import scripted

SOURCE = "The library opened in 1962. It lends books free of charge."
GOOD = "The library opened in 1962."
BAD = "The library opened in 1962. It charges FALSE two dollars. It has FALSE floors."


@pytest.fixture(autouse=True)
def backend() -> None:
    register_backend("fake", lambda _arg, _settings: scripted.backend())


def _batch(tmp_path: Path, name: str, records: list[dict[str, Any]], *flags: str) -> Path:
    src, out = tmp_path / f"{name}.in.jsonl", tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    main(["batch", str(src), str(out), "--mode", "check", "--llm", "fake", "--no-progress",
          *flags])
    return out


RECORDS = [{"id": "good", "source": SOURCE, "response": GOOD},
           {"id": "bad | `odd`\nid", "source": SOURCE, "response": BAD},
           {"id": 7, "source": SOURCE, "response": "   "}]  # fails to run: empty


def test_the_json_summary_counts_what_a_nightly_job_needs(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    summary = tmp_path / "reports" / "nightly" / "summary.json"  # folders not yet made
    _batch(tmp_path, "out", RECORDS, "--summary", str(summary), "--fail-on", "hallucinated")
    got = json.loads(summary.read_text("utf-8"))
    assert got["format"] == "conli-batch-summary-1" and got["exit_code"] == 4
    assert got["records"] == 3
    assert got["verdicts"] == {"error": 1, "hallucinated": 1, "supported": 1}
    assert got["gate"] == {"threshold": None, "fail_on": "hallucinated", "fails": True,
                           "counts": {"passed": 1, "failed": 1, "unverified": 0},
                           "unranked": 0}
    assert got["pass_rate"] == pytest.approx(1 / 3)
    assert got["means"]["support_score"] == 0.5 and got["means"]["judge_after"] is None
    assert got["reasons"] == [{"verdict": "hallucinated", "detector": "sentence_nli",
                               "label": "contradiction", "sentences": 2}]
    assert got["failing_ids"] == ["bad | `odd`\nid"]
    assert got["errors"] == {"EmptyInputError": 1} and got["error_ids"] == ["7"]
    spread = got["timings"]["check_seconds"]
    assert spread["records"] == 2 and 0 < spread["p50"] <= spread["p95"] <= spread["max"]
    assert got["timings"]["run_seconds"] > 0 and got["run"]["processed"] == 3
    assert got["run"]["calls"] == 2


def test_github_gets_a_job_summary_and_one_annotation_per_failing_record(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    step = tmp_path / "step-summary.md"
    step.write_text("an earlier step's summary\n", "utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    _batch(tmp_path, "out", RECORDS, "--fail-on", "hallucinated")
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "::error title=conli%3A 7 failed to run::EmptyInputError: response is empty",
        "::error title=conli%3A bad | `odd`%0Aid did not pass::verdict hallucinated: "
        "sentence 1 'It charges FALSE two dollars.': contradiction: contradicted by the "
        "source Quoted, but not found in the source: \"quoted source\""]
    text = step.read_text("utf-8")
    assert text.startswith("an earlier step's summary\n### conli batch (check): 3 records: "
                           "1 did not pass, 1 failed to run\n")  # appended, as GitHub asks
    assert "| pass rate | 33\\.3% |" in text
    assert "- bad \\| \\`odd\\` id: verdict hallucinated" in text  # one line, escaped
    assert "- 7: EmptyInputError: response is empty" in text


def test_without_github_nothing_is_printed_for_it(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    _batch(tmp_path, "out", RECORDS, "--fail-on", "hallucinated")
    assert capsys.readouterr().out == ""


def test_junit_carries_each_checks_time_and_every_flagged_sentence(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "reports" / "conli.xml"  # cli.md's example, on a fresh clone
    out = _batch(tmp_path, "out", RECORDS, "--junit", str(junit))
    root = ElementTree.parse(junit).getroot()
    (suite,) = root
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    times = {json.loads(line)["id"]: json.loads(line).get("result", {}).get("timings", {})
             for line in out.read_text("utf-8").splitlines()}
    assert float(cases["good"].get("time") or 0) == pytest.approx(times["good"]["total"],
                                                                  abs=1e-3)
    assert float(suite.get("time") or 0) == pytest.approx(
        times["good"]["total"] + times["bad | `odd`\nid"]["total"], abs=2e-3)
    (failure,) = cases["bad | `odd`\nid"]
    assert (failure.text or "").splitlines() == [
        "sentence 1 (hallucinated) 'It charges FALSE two dollars.': contradiction: "
        "contradicted by the source Quoted, but not found in the source: \"quoted source\"",
        "sentence 2 (hallucinated) 'It has FALSE floors.': contradiction: "
        "contradicted by the source Quoted, but not found in the source: \"quoted source\""]
    assert cases["7"].get("time") == "0.000"


def test_the_reports_share_one_read_of_out_after_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The figures, --summary and --junit come from one read of OUT after the run.

    The mode check reads it once before the run (OUT grows during it); nothing else here.
    """
    from conli.cli import batch

    reads: list[Path] = []
    real = batch.out_records

    def counted(path: Path) -> Any:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(batch, "out_records", counted)
    junit, summary = tmp_path / "conli.xml", tmp_path / "summary.json"
    out = _batch(tmp_path, "out", RECORDS, "--junit", str(junit), "--summary", str(summary))
    assert reads == [out, out]
    (suite,) = ElementTree.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    assert json.loads(summary.read_text("utf-8"))["records"] == 3


# --- conli diff ------------------------------------------------------------------------------

OLD = [{"id": "stays", "source": SOURCE, "response": GOOD},
       {"id": "breaks", "source": SOURCE, "response": GOOD},
       {"id": "mends", "source": SOURCE, "response": BAD},
       {"id": "gone", "source": SOURCE, "response": GOOD}]
NEW = [{"id": "stays", "source": SOURCE, "response": GOOD},
       {"id": "breaks", "source": SOURCE, "response": BAD},
       {"id": "mends", "source": SOURCE, "response": GOOD},
       {"id": "fresh", "source": SOURCE, "response": BAD}]


def _runs(tmp_path: Path) -> tuple[Path, Path]:
    return _batch(tmp_path, "old", OLD), _batch(tmp_path, "new", NEW)


def test_diff_names_new_failures_fixes_flips_and_score_moves(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _runs(tmp_path)
    capsys.readouterr()
    assert main(["diff", str(old), str(new), "--json"]) == 0  # no --fail-on: 0
    got = json.loads(capsys.readouterr().out)
    assert got["counts"] == {"in_both": 3, "new_failures": 2, "fixed": 1, "flips": 2,
                             "moves": 2, "added": 1, "gone": 1}
    assert [c["id"] for c in got["new_failures"]] == ["breaks", "fresh"]
    breaks = got["new_failures"][0]
    assert (breaks["old"]["outcome"], breaks["new"]["outcome"]) == ("passed", "failed")
    assert "It charges FALSE two dollars." in breaks["new"]["why"]
    assert [c["id"] for c in got["fixed"]] == ["mends"]
    assert [(c["id"], c["old"]["verdict"], c["new"]["verdict"]) for c in got["flips"]] == [
        ("breaks", "supported", "hallucinated"), ("mends", "hallucinated", "supported")]
    assert [(c["id"], c["moved"]) for c in got["moves"]] == [
        ("breaks", {"support": -1.0}), ("mends", {"support": 1.0})]
    assert [c["id"] for c in got["gone"]] == ["gone"]


@pytest.mark.parametrize(("gate", "code"), [("new-failures", 4), ("flips", 4), ("moves", 4)])
def test_diff_exits_4_on_the_change_a_ci_gates_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], gate: str, code: int) -> None:
    old, new = _runs(tmp_path)
    capsys.readouterr()
    assert main(["diff", str(old), str(new), "--fail-on", gate]) == code
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == ("conli diff: in both 3 · new failures 2 · fixed 1 · "
                                   "flips 2 · moves 2 · added 1 · gone 1")
    assert "new failures (2):" in out and "  breaks: supported -> hallucinated (passed -> " \
        "failed), support 1 -> 0 (-1): verdict hallucinated" in out
    assert f"--fail-on {gate}: found" in err


def test_a_run_that_changed_nothing_passes_every_gate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _batch(tmp_path, "old", OLD)
    assert main(["diff", str(old), str(old), "--fail-on", "new-failures", "--fail-on",
                 "flips", "--fail-on", "moves"]) == 0
    assert "new failures 0 · fixed 0 · flips 0 · moves 0" in capsys.readouterr().out


def test_a_threshold_held_to_both_runs_can_make_a_new_failure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Scores under ``--threshold`` fail in NEW only when they fell; both runs get one bar."""
    old = tmp_path / "old.jsonl"
    new = tmp_path / "new.jsonl"

    def record(score: float) -> str:
        sentence = {"index": 0, "text": GOOD, "start": 0, "end": len(GOOD), "checked": True,
                    "verdict": "supported", "score": score, "score_method": "logprobs"}
        return json.dumps({"id": "a", "ok": True, "result": {
            "verdict": "supported", "support_score": score, "sentences": [sentence]}}) + "\n"

    old.write_text(record(0.9), "utf-8")
    new.write_text(record(0.6), "utf-8")
    assert main(["diff", str(old), str(new), "--fail-on", "new-failures"]) == 0
    assert main(["diff", str(old), str(new), "--threshold", "0.7",
                 "--fail-on", "new-failures"]) == 4
    assert "scored 0.6 below threshold 0.7" in capsys.readouterr().out


@pytest.mark.parametrize("content", [b"", b"not json\n", b'{"neither": "id nor line"}\n'])
def test_diff_refuses_a_file_with_no_batch_record(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes) -> None:
    old = _batch(tmp_path, "old", OLD)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    assert main(["diff", str(old), str(bad)]) == 2
    assert "holds no conli batch record" in capsys.readouterr().err
    assert main(["diff", str(tmp_path / "missing.jsonl"), str(old)]) == 2


def test_diff_on_github_adds_its_counts_and_new_failures_and_annotates_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    old, new = _runs(tmp_path)
    step = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    capsys.readouterr()
    assert main(["diff", str(old), str(new), "--fail-on", "new-failures"]) == 4
    text = step.read_text("utf-8")
    assert text.startswith("### conli diff\n") and "| new failures | 2 |" in text
    assert "- breaks: supported \\-\\> hallucinated \\(passed \\-\\> failed\\)" in text
    errors = [line for line in capsys.readouterr().out.splitlines() if line.startswith("::")]
    assert [line.split("::")[1] for line in errors] == [
        "error title=conli%3A breaks newly fails", "error title=conli%3A fresh newly fails"]
