"""An audit trail two reviewers can sign (issue 65 item 5), in a real headless Chromium.

Two reviewers mark the same ``conli batch`` report in their own browsers: their marks carry
a time, the results file's hash and conli's version; one signs off ("reviewed N of M by X on
DATE"), and a change after it withdraws the sign-off. ``conli report --marks`` shows both
reviewers' marks, where they disagree and the sign-off; ``conli calibrate`` on both files
takes the agreed labels and names the disagreement instead of refusing the repeated id. A
page's marks kept in the old form (a bare choice) still restore. The index sorts by the
judge score before the rewrite, and the CSV has it.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from conli.backends import register_backend
from conli.cli import app as cli
from conli.version import __version__
from tests.support import scripted
from tests.support.audit_report import SOURCE, batch_report
from tests.support.chromium import launched
from tests.support.readers import ReadingBackend

playwright = pytest.importorskip("playwright.sync_api")
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.skipif(BROWSER is None,
                                 reason="chromium is not installed (apt-get install -y chromium)"),
              pytest.mark.integration]


@pytest.fixture(autouse=True)
def backends() -> None:
    register_backend("reading", lambda _arg, _settings: ReadingBackend())
    register_backend("fake", lambda _arg, _settings: scripted.backend())


def _truth(row: Any) -> str:
    """The mark an auditor who knows the truth gives (only 90,000 is wrong)."""
    wrong_text = "90,000" in row.locator(".sent").inner_text()
    return "right" if (row.get_attribute("data-flagged") == "true") == wrong_text else "wrong"


def _review(browser: Any, page_file: Path, target: Path, reviewer: str, *,
            dissent: str | None = None, sign: bool = False) -> None:
    """One reviewer, in a browser of their own: mark every sentence, download the marks.

    ``dissent``: the record whose 90,000 sentence this reviewer marks against the truth.
    """
    context = browser.new_context(accept_downloads=True)
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(page_file.as_uri())
        assert page.locator("#sign-off").is_disabled()  # nothing marked, no name
        page.fill("#reviewer", reviewer)
        for row in page.locator("#records li.review").all():
            choice = _truth(row)
            rec = row.locator("xpath=ancestor::section").get_attribute("data-id")
            if rec == dissent and "90,000" in row.locator(".sent").inner_text():
                choice = "wrong" if choice == "right" else "right"
            row.locator(f"button[data-mark={choice}]").click()
        if sign:
            page.click("#r1 button[data-decide=approve]")
            page.click("#sign-off")
            assert re.fullmatch(rf"reviewed 12 of 12 by {reviewer} on \d{{4}}-\d\d-\d\dT"
                                r"\d\d:\d\d:\d\dZ", page.inner_text("#signed"))
            row = page.locator("#r2 li.review").first
            mine = row.locator(f"button[data-mark={row.get_attribute('data-marked')}]")
            mine.click()  # a change after signing (the mark taken back) withdraws it
            assert page.inner_text("#signed") == "not signed off"
            mine.click()  # and given again
            page.click("#sign-off")
        with page.expect_download() as info:
            page.click("#download-marks")
        info.value.save_as(target)
        assert errors == []
    finally:
        context.close()


def test_two_reviewers_sign_their_marks_and_calibrate_on_what_they_agree_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = batch_report(tmp_path)
    ada, bob = tmp_path / "ada.jsonl", tmp_path / "bob.jsonl"
    with launched() as browser:
        _review(browser, report, ada, "Ada", sign=True)
        _review(browser, report, bob, "Bob", dissent="a3")
    rows = [json.loads(line) for line in ada.read_text("utf-8").splitlines()]
    *marks, signed = rows
    sha256 = hashlib.sha256((tmp_path / "out.jsonl").read_bytes()).hexdigest()
    assert signed == {"kind": "sign-off", "reviewer": "Ada", "signed_at": signed["signed_at"],
                      "reviewed": 12, "records": 12, "results_sha256": sha256,
                      "conli_version": __version__}
    assert len(marks) == 25 and {m["reviewer"] for m in marks} == {"Ada"}
    assert {m["results_sha256"] for m in marks} == {sha256}
    assert {m["conli_version"] for m in marks} == {__version__}
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", m["marked_at"]) for m in marks)

    # both reviewers' marks in one report: the disagreement shown, and the sign-off
    capsys.readouterr()
    assert cli.main(["report", str(tmp_path / "out.jsonl"), "--marks", str(ada), "--marks",
                     str(bob), "-o", str(tmp_path / "signed.html")]) == 0
    page = (tmp_path / "signed.html").read_text("utf-8")
    assert (f"reviewed 12 of 12 by Ada on {signed['signed_at']} (this results file, conli "
            f"{__version__})") in page
    assert "24 items marked by two or more reviewers: 23 agree, 1 disagree (96% agreement)" \
        in page
    index = json.loads(re.search(r'id="report-index">(.*?)</script>', page, re.S)
                       .group(1))  # type: ignore[union-attr]
    assert [(r["id"], r["agreement"]) for r in index if r["agreement"] == "disagree"] == [
        ("a3", "disagree")]
    assert all(r["reviewers"] == ["Ada", "Bob"] for r in index)
    with launched() as browser:
        shown = browser.new_page()
        shown.goto((tmp_path / "signed.html").as_uri())
        shown.check("#f-split")
        assert shown.inner_text("#page-label").endswith(" 1 of 12 records")
        split = shown.locator("#r4 .reviews.disagree")
        assert split.count() == 1 and "Ada: right" in split.inner_text() \
            and "Bob: wrong" in split.inner_text()
        assert "Ada, Bob (disagree)" in shown.locator("#index-rows tr").first.inner_text()

    # calibrate on both files as they are: the agreed labels, the disagreement named
    both = tmp_path / "both.jsonl"
    both.write_bytes(ada.read_bytes() + bob.read_bytes())
    assert cli.main(["calibrate", "--file", str(both), "--llm", "reading", "--out",
                     str(tmp_path / "cal.json"), "--cache-dir", str(tmp_path / "cache")]) == 0
    out, err = capsys.readouterr()
    assert ("reviewers disagree on 1 example(s), left out of the fit: a3#1 (Ada: hallucinated, "
            "Bob: supported)") in err
    assert "examples: 24 (" in out  # 24 sentences and a0's approval, less a3#1


def test_a_pages_marks_kept_in_the_old_form_still_restore(tmp_path: Path) -> None:
    report = batch_report(tmp_path)
    with launched() as browser:
        page = browser.new_page(accept_downloads=True)
        page.goto(report.as_uri())
        key = "conli-report:" + str(page.get_attribute("body", "data-report"))
        old = {"reviewer": "Old", "sentences": {"1/0": "right", "2/1": "wrong"},
               "records": {"2": {"decision": "reject", "comment": "kept"}}}
        page.evaluate("([k, v]) => localStorage.setItem(k, v)", [key, json.dumps(old)])
        page.reload()
        assert page.input_value("#reviewer") == "Old"
        assert page.locator("#r1 li.review[data-index='0']").get_attribute(
            "data-marked") == "right"
        assert page.locator("#r2 .decision").get_attribute("data-decided") == "reject"
        with page.expect_download() as info:
            page.click("#download-marks")
        info.value.save_as(tmp_path / "old.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "old.jsonl").read_text().splitlines()]
    assert [(r["id"], r["mark"], r["marked_at"]) for r in rows] == [
        ("a0#0", "right", ""), ("a1#1", "wrong", ""), ("a1", "wrong", "")]


def test_the_index_sorts_and_exports_the_judge_score_before_the_rewrite(
        tmp_path: Path) -> None:
    """The worst raw answers sort to the top, whatever the rewrite made of them."""
    (tmp_path / "in.jsonl").write_text(json.dumps(
        {"id": "x", "source": SOURCE, "response": "It opened in 1921. It has FALSE books."}) + "\n")
    assert cli.main(["batch", str(tmp_path / "in.jsonl"), str(tmp_path / "one.jsonl"),
                     "--llm", "fake", "--judge", "--no-progress"]) == 0
    row = json.loads((tmp_path / "one.jsonl").read_text())
    lines = []
    for i, before in enumerate([4, 1, 5, 2, 3]):
        copy = json.loads(json.dumps(row))
        copy["id"] = f"rec-{i}"
        copy["result"]["judge_raw"]["score"] = before
        copy["result"]["judge_refined"]["score"] = 5 - i % 2
        lines.append(json.dumps(copy) + "\n")
    (tmp_path / "five.jsonl").write_text("".join(lines))
    assert cli.main(["report", str(tmp_path / "five.jsonl"), "-o",
                     str(tmp_path / "five.html")]) == 0
    with launched() as browser:
        page = browser.new_page(accept_downloads=True)
        page.goto((tmp_path / "five.html").as_uri())
        page.select_option("#f-sort", "judge_before")
        order = [tr.inner_text().split("\t")[1] for tr in page.locator("#index-rows tr").all()]
        assert order == ["rec-1", "rec-3", "rec-4", "rec-0", "rec-2"]
        assert "1 → 4" in page.locator("#index-rows tr").first.inner_text()
        page.select_option("#f-sort", "-judge_before")
        assert page.locator("#index-rows tr").first.inner_text().split("\t")[1] == "rec-2"
        with page.expect_download() as info:
            page.click("#download-csv")
        info.value.save_as(tmp_path / "five.csv")
    with (tmp_path / "five.csv").open(newline="") as handle:
        first = next(csv.DictReader(handle))
    assert (first["id"], first["judge_before"], first["judge"]) == ("rec-2", "5", "5")
