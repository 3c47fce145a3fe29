"""Labelled files and the report's marks, held to their own fields (issue 52.3, 52.4, 52.5).

A marks file with a non-UTF-8 byte, a label that contradicts its own verdict and mark, a
mark that is neither right nor wrong, an id that is not a string, or one id on two rows is
refused with exit 2 naming the line, by ``conli calibrate`` and ``conli eval --file`` alike;
examples detection could not check are named, not silently counted; and ``conli report``
over concatenated OUT files gives every record its own id.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from conli.cli import app as cli
from conli.report.html import write_report

SOURCE = "The library opened in 1921. It holds 40,000 books. The mayor attended the opening."


pytestmark = pytest.mark.usefixtures("reading_backend")


def _row(i: int, **fields: Any) -> dict[str, Any]:
    bad = i % 2 == 0
    response = ("The library opened in 1921. It holds 90,000 books." if bad
                else "The library opened in 1921. It holds 40,000 books.")
    return {"id": f"x{i}", "source": SOURCE, "response": response, "label": bad, **fields}


def _write(path: Path, rows: list[dict[str, Any]], *, raw: bytes = b"") -> Path:
    path.write_bytes("".join(json.dumps(r) + "\n" for r in rows).encode() + raw)
    return path


def _calibrate(tmp_path: Path, data: Path) -> list[str]:
    return ["calibrate", "--file", str(data), "--llm", "reading", "--out",
            str(tmp_path / "cal.json"), "--no-cache"]


def _eval(tmp_path: Path, data: Path) -> list[str]:
    return ["eval", "detect", "--file", str(data), "--llm", "reading", "--no-cache",
            "--out", str(tmp_path / "eval-out")]


@pytest.mark.parametrize("door", [_calibrate, _eval])
def test_a_marks_file_with_a_byte_that_is_not_utf8_is_refused_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], door: Any,
) -> None:
    data = _write(tmp_path / "marks.jsonl", [_row(0), _row(1)],
                  raw=b'{"id": "x2", "source": "caf\xe9", "response": "r", "label": true}\n')
    assert cli.main(door(tmp_path, data)) == 2
    err = capsys.readouterr().err
    assert "marks.jsonl:3: not UTF-8" in err and "\\xe9" in err and "Traceback" not in err
    assert not (tmp_path / "cal.json").exists()


@pytest.mark.parametrize(("bad", "message"), [
    ({"verdict": "hallucinated", "mark": "right", "label": False},
     "label false contradicts the row's own verdict 'hallucinated' marked 'right'"),
    ({"verdict": "supported", "mark": "wrong", "label": False},
     "label false contradicts the row's own verdict 'supported' marked 'wrong'"),
    ({"verdict": "supported", "mark": "maybe"}, "mark must be 'right' or 'wrong', got 'maybe'"),
    ({"verdict": "fine"}, "a marked row needs the verdict it marks"),
    ({"id": {"x": 1}}, "id must be a string, got dict"),
    ({"id": "x1"}, "id 'x1' is already the id of line 2"),
])
@pytest.mark.parametrize("door", [_calibrate, _eval])
def test_a_tampered_marks_file_is_refused_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: dict[str, Any], message: str,
    door: Any,
) -> None:
    rows = [_row(i, verdict="hallucinated" if i % 2 == 0 else "supported", mark="right")
            for i in range(30)]
    rows[5] = {**rows[5], **bad}  # line 6
    assert cli.main(door(tmp_path, _write(tmp_path / "marks.jsonl", rows))) == 2
    err = capsys.readouterr().err
    assert "marks.jsonl:6: " in err and message in err, err
    assert not (tmp_path / "cal.json").exists()


@pytest.mark.slow
def test_marks_that_agree_with_their_rows_calibrate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """Both ways a row can be hallucinated: a flag marked right, a pass marked wrong."""
    rows = [_row(i, verdict="hallucinated" if i % 4 == 0 else "supported",
                 mark="right" if i % 4 in (0, 1, 3) else "wrong") for i in range(30)]
    rows = [{**r, "id": i} if i < 3 else r for i, r in enumerate(rows)]  # integer ids too
    assert cli.main(_calibrate(tmp_path, _write(tmp_path / "marks.jsonl", rows))) == 0, \
        capsys.readouterr().err


@pytest.mark.slow
def test_calibrate_names_the_examples_it_could_not_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONLI_MAX_SOURCE_CHARS", "500")
    rows = [_row(i) for i in range(30)]
    rows += [{**_row(30), "id": "too-long", "source": SOURCE * 10},
             {**_row(31), "id": "surrogate", "response": "It opened in 1921 \ud800."}]
    assert cli.main(_calibrate(tmp_path, _write(tmp_path / "d.jsonl", rows))) == 0
    err = capsys.readouterr().err
    assert "could not check 2 of 32 examples, left out of the fit" in err
    assert "too-long: source has 820 characters, over the limit of 500" in err
    assert "surrogate: response is not valid Unicode: a lone surrogate" in err
    assert json.loads((tmp_path / "cal.json").read_text())["examples"] == 30


def test_calibrate_with_nothing_checkable_says_why_not_log_probabilities(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONLI_MAX_SOURCE_CHARS", "20")
    assert cli.main(_calibrate(tmp_path, _write(tmp_path / "d.jsonl",
                                                [_row(i) for i in range(24)]))) == 2
    err = capsys.readouterr().err
    assert "none of the 24 examples could be checked" in err
    assert "x0: source has 82 characters, over the limit of 20" in err
    assert "log-probabilities" not in err


def test_the_report_over_concatenated_out_files_gives_each_record_its_own_id(
    tmp_path: Path,
) -> None:
    from conli.report.records import iter_results

    run = [{"id": name, "ok": False, "source": SOURCE, "response": "r",
            "error": {"type": "InputError", "message": "x"}} for name in ("a", "b")]
    out = tmp_path / "both.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in run + run), "utf-8")
    ids = [r["id"] for r in iter_results(out) if isinstance(r, dict)]
    assert ids == ["a", "b", "a (line 3)", "b (line 4)"]
    page = tmp_path / "page.html"
    with page.open("w", encoding="utf-8") as handle:
        write_report(out, handle, title="t")
    html = page.read_text("utf-8")
    assert 'data-id="a (line 3)"' in html and html.count('data-id="a"') == 1


# --- four eyes (issue 65.5): several reviewers' marks of one id ------------------------------


def _two_reviewers(tmp_path: Path, *, split: set[int]) -> Path:
    """30 rows marked by Ada and again by Bob, who disagrees on the rows in ``split``."""
    rows = []
    for who in ("Ada", "Bob"):
        for i in range(30):
            row = _row(i, verdict="hallucinated" if i % 2 == 0 else "supported", mark="right",
                       reviewer=who)
            if who == "Bob" and i in split:
                row = {**row, "mark": "wrong", "label": not row["label"]}
            rows.append(row)
    rows.append({"kind": "sign-off", "reviewer": "Bob", "signed_at": "2025-06-01T09:00:00Z",
                 "reviewed": 30, "records": 30})
    return _write(tmp_path / "both.jsonl", rows)


@pytest.mark.slow
def test_calibrate_takes_the_label_reviewers_agree_on_and_names_where_they_do_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(_calibrate(tmp_path, _two_reviewers(tmp_path, split={3, 8}))) == 0
    out, err = capsys.readouterr()
    assert ("reviewers disagree on 2 example(s), left out of the fit: x3 (Ada: supported, "
            "Bob: hallucinated); x8 (Ada: hallucinated, Bob: supported)") in err
    assert "examples: 28 (14 hallucinated)" in out
    assert json.loads((tmp_path / "cal.json").read_text())["examples"] == 28


@pytest.mark.parametrize(("second", "message"), [
    ({"reviewer": "Ada"}, "id 'x1' is already the id of line 2; Ada marked it twice"),
    ({"reviewer": "Bob", "response": "It holds 40,000 books."},
     "id 'x1' is already the id of line 2; the two rows mark different texts"),
    ({"reviewer": ""}, "id 'x1' is already the id of line 2; each example needs its own id"),
])
def test_a_repeated_id_that_is_not_a_second_reviewers_mark_is_still_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], second: dict[str, Any], message: str,
) -> None:
    rows = [_row(i, verdict="hallucinated" if i % 2 == 0 else "supported", mark="right",
                 reviewer="Ada") for i in range(30)]
    rows.append({**rows[1], **second})
    assert cli.main(_calibrate(tmp_path, _write(tmp_path / "m.jsonl", rows))) == 2
    assert f"m.jsonl:31: {message}" in capsys.readouterr().err


def test_the_report_shows_marks_files_old_and_new_and_refuses_a_tampered_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out.jsonl"
    assert cli.main(["batch", str(_write(tmp_path / "in.jsonl", [
        {"id": "x1", "source": SOURCE, "response": "It holds 90,000 books."}])), str(out),
        "--llm", "reading", "--no-progress", "--mode", "check"]) == 0
    verdict = json.loads(out.read_text())["result"]["sentences"][0]["verdict"]
    old = {"id": "x1#0", "source": SOURCE, "response": "It holds 90,000 books.",
           "verdict": verdict, "mark": "right", "label": verdict != "supported",
           "reviewer": "Ada", "decision": "", "comment": ""}  # as a page before issue 65 wrote
    new = {**old, "mark": "wrong", "label": verdict == "supported", "reviewer": "Bob",
           "marked_at": "2025-06-01T09:00:00Z",
           "results_sha256": hashlib.sha256(out.read_bytes()).hexdigest()}
    ada, bob = _write(tmp_path / "ada.jsonl", [old]), _write(tmp_path / "bob.jsonl", [new])
    page = tmp_path / "page.html"
    assert cli.main(["report", str(out), "--marks", str(ada), "--marks", str(bob),
                     "-o", str(page)]) == 0
    html = page.read_text("utf-8")
    assert "1 by Ada (ada.jsonl; made on results file not recorded)" in html
    assert "1 by Bob (bob.jsonl; made on this results file)" in html
    assert "1 items marked by two or more reviewers: 0 agree, 1 disagree (0% agreement)" in html
    tampered = _write(tmp_path / "bad.jsonl", [old, {**new, "label": not new["label"]}])
    capsys.readouterr()
    assert cli.main(["report", str(out), "--marks", str(tampered), "-o",
                     str(tmp_path / "no.html")]) == 2
    assert "bad.jsonl:2: not a mark of the report (label" in capsys.readouterr().err
    assert not (tmp_path / "no.html").exists()
