"""An auditor's marks in a real headless Chromium teach the checker: click, download, calibrate.

The report of a ``conli batch`` run is opened from its file; the test clicks each sentence's
"right" or "wrong" as an auditor who knows the truth would, downloads the marks through the
page's own button, and hands the file to ``conli calibrate`` as it is. The calibration then
changes the verdict on a held case the marks never saw.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from conli.cli import app as cli
from tests.support.audit_report import BAD, GOOD, SOURCE, batch_report
from tests.support.chromium import launched
from tests.support.paths import ROOT

HELD = "The mayor attended the opening."  # in no marked record

playwright = pytest.importorskip("playwright.sync_api")
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.skipif(BROWSER is None,
                                 reason="chromium is not installed (apt-get install -y chromium)"),
              pytest.mark.usefixtures("reading_backend"),
              pytest.mark.integration]


def _mark_and_download(page_file: Path, target: Path) -> int:
    """Mark every sentence as the truth has it (only 90,000 is wrong); save the download."""
    with launched() as browser:
        page = browser.new_page(accept_downloads=True)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error"
                else None)
        page.goto(page_file.as_uri())
        assert page.locator("#download-marks").is_disabled()
        rows = page.locator("#records li.review").all()
        for row in rows:
            wrong_text = "90,000" in row.locator(".sent").inner_text()
            flagged = row.get_attribute("data-flagged") == "true"
            choice = "right" if flagged == wrong_text else "wrong"
            row.locator(f"button[data-mark={choice}]").click()
        assert page.locator("#mark-count").inner_text() == str(len(rows))
        with page.expect_download() as info:
            page.locator("#download-marks").click()
        info.value.save_as(target)
        assert errors == []  # the CSP let the script run, and it raised nothing
        return len(rows)


def _verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    (tmp_path / "s.txt").write_text(SOURCE)
    (tmp_path / "held.txt").write_text(HELD)
    capsys.readouterr()
    cli.main(["check", "--source", str(tmp_path / "s.txt"), "--response",
              str(tmp_path / "held.txt"), "--llm", "reading", "--json", "--no-mitigate",
              *extra])
    return str(json.loads(capsys.readouterr().out)["verdict"])


def test_marks_from_the_browser_calibrate_the_checker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marks = tmp_path / "conli-marks.jsonl"
    marked = _mark_and_download(batch_report(tmp_path), marks)
    rows = [json.loads(line) for line in marks.read_text().splitlines()]
    assert len(rows) == marked == 24
    assert {r["response"] for r in rows if r["label"]} == {"It holds 90,000 books."}
    assert all(r["source"] == SOURCE for r in rows)

    before = _verdict(tmp_path, capsys)
    assert cli.main(["calibrate", "--file", str(marks), "--llm", "reading", "--out",
                     str(tmp_path / "cal.json"), "--cache-dir", str(tmp_path / "cache")]) == 0
    assert "examples: 24 (6 hallucinated)" in capsys.readouterr().out
    after = _verdict(tmp_path, capsys, "--calibration", str(tmp_path / "cal.json"))
    assert (before, after) == ("hallucinated", "supported")


# --- 2,000 records: paged, searched, filtered, sorted; marks kept across a reload ----------

CHUNKS = ["The library opened in 1921.", "It holds 40,000 books. The mayor attended the opening."]
RECORDS = 2000


def _evidence(sentence: dict[str, Any]) -> list[dict[str, Any]]:
    """Where each sentence's verdict rests in the two chunks, as a RAG check records it."""
    if "1921" in sentence["text"]:
        return [{"source": 0, "start": 0, "end": 27, "text": CHUNKS[0], "relation": "supports"}]
    relation = "supports" if "40,000" in sentence["text"] else "contradicts"
    return [{"source": 1, "start": 0, "end": 22, "text": CHUNKS[1][:22], "relation": relation}]


def _many(tmp_path: Path) -> Path:
    """2,000 records made from one real batch run of GOOD and BAD, shown over two chunks.

    Record i answers BAD when i is odd; its support score is i / 2000, so every band and
    the sort have known answers. No model: the reading backend answers, GOOD is made
    supported.
    """
    (tmp_path / "two.jsonl").write_text("".join(
        json.dumps({"id": key, "source": SOURCE, "response": text}) + "\n"
        for key, text in (("good", GOOD), ("bad", BAD))))
    assert cli.main(["batch", str(tmp_path / "two.jsonl"), str(tmp_path / "two.out.jsonl"),
                     "--llm", "reading", "--no-progress"]) == 0
    good, bad = (json.loads(line) for line in (tmp_path / "two.out.jsonl").read_text()
                 .splitlines())
    lines = []
    for i in range(RECORDS):
        row = json.loads(json.dumps(bad if i % 2 else good))
        result = row["result"]
        for sentence in result["sentences"]:
            sentence["evidence"] = _evidence(sentence)
            if not i % 2:  # the reading backend flags every sentence; GOOD passes here
                sentence.update(verdict="supported", reasons=[])
        if not i % 2:
            result.update(verdict="supported", passed=True)
        result["support_score"] = i / RECORDS
        lines.append(json.dumps({**row, "id": f"rec-{i:04d}", "source": CHUNKS}) + "\n")
    (tmp_path / "many.jsonl").write_text("".join(lines))
    assert cli.main(["report", str(tmp_path / "many.jsonl"), "-o",
                     str(tmp_path / "many.html")]) == 0
    return tmp_path / "many.html"


def _label(page: Any) -> str:
    return str(page.locator("#page-label").inner_text())


def _first(page: Any) -> str:
    return str(page.locator("#index-rows tr").first.get_attribute("data-n"))


def _browse(page: Any) -> None:
    """Search, filters, sort, paging and a link to a record on another page."""
    assert _label(page) == "page 1 of 80 · 2000 of 2000 records"
    assert page.locator("#index-rows tr").count() == page.locator("#records section").count() == 25
    page.select_option("#f-verdict", "supported")
    assert _label(page).endswith(" 1000 of 2000 records")
    page.select_option("#f-verdict", "")
    page.check("#f-look")  # BAD is flagged; GOOD is not
    assert _label(page).endswith(" 1000 of 2000 records")
    page.select_option("#f-passed", "yes")
    assert _label(page).endswith(" 0 of 2000 records")
    page.select_option("#f-passed", "")
    page.uncheck("#f-look")
    page.select_option("#f-band", "0")  # support score below 0.25: records 0-499
    assert _label(page) == "page 1 of 20 · 500 of 2000 records"
    page.select_option("#f-band", "")
    page.fill("#f-search", "REC-1234")  # an id, in any case
    assert _label(page).endswith(" 1 of 2000 records") and _first(page) == "1235"
    page.fill("#f-search", "90,000 books")  # the response's text
    assert _label(page).endswith(" 1000 of 2000 records")
    page.fill("#f-search", "")
    page.select_option("#f-sort", "-score")
    assert _first(page) == "2000"
    page.select_option("#f-sort", "")
    page.click("#page-next")
    assert _label(page).startswith("page 2 of 80") and _first(page) == "26"
    page.goto(page.url.split("#")[0] + "#r1500-e1")  # a span's link, on page 60
    assert _label(page).startswith("page 60 of 80")
    chunk = page.locator("#r1500-c1")
    assert chunk.locator(".chunk-label").inner_text() == "chunk 1"
    assert chunk.locator("mark.span.contradicts").inner_text() == "It holds 40,000 books."
    link = page.locator("#r1500 li.review .evidence a.chunk-label").last
    assert link.inner_text() == "chunk 1" and link.get_attribute("href") == "#r1500-e1"


def _mark(page: Any) -> int:
    """Name the reviewer; mark records 1-12's sentences as the truth has it, decide three."""
    page.fill("#reviewer", "Ada")
    marked = 0
    for section in page.locator("#records section.rec").all()[:12]:
        for row in section.locator("li.review").all():
            wrong_text = "90,000" in row.locator(".sent").inner_text()
            flagged = row.get_attribute("data-flagged") == "true"
            choice = "right" if flagged == wrong_text else "wrong"
            row.locator(f"button[data-mark={choice}]").click()
            marked += 1
    for n, choice in ((1, "approve"), (2, "approve"), (3, "reject")):
        page.click(f"#r{n} button[data-decide={choice}]")
        page.fill(f"#r{n} textarea.comment", f"checked by hand, {n}")
    return marked


def _download(page: Any, button: str, target: Path) -> list[str]:
    with page.expect_download() as info:
        page.click(button)
    info.value.save_as(target)
    return target.read_text(encoding="utf-8").splitlines()


def _screenshot(page: Any, tmp_path: Path) -> None:
    """The filters at work: flagged records among the first ten, as docs/report.md shows them.

    CONLI_UPDATE_SCREENSHOT=1 refreshes docs/report-screenshot.png; by default the test
    leaves tracked files alone (the PNG's bytes differ on every render).
    """
    page.select_option("#f-verdict", "")
    page.check("#f-look")
    page.fill("#f-search", "rec-000")
    assert _label(page) == "page 1 of 1 · 5 of 2000 records"
    page.set_viewport_size({"width": 1280, "height": 1500})
    page.locator(".legend").evaluate(  # the toolbar at the top, the index, the records
        "legend => window.scrollTo(0, legend.offsetTop + legend.offsetHeight)")
    update = os.environ.get("CONLI_UPDATE_SCREENSHOT") == "1"
    shot = ROOT / "docs" / "report-screenshot.png" if update else tmp_path / "report.png"
    page.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_2000_record_report_pages_filters_keeps_marks_and_exports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _many(tmp_path)
    with launched() as browser:
        page = browser.new_page(accept_downloads=True)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(report.as_uri())
        _browse(page)
        page.goto(report.as_uri())
        marked = _mark(page)
        count = page.locator("#mark-count").inner_text()
        page.reload()  # an afternoon's work survives it
        assert page.locator("#mark-count").inner_text() == count == str(marked + 3)
        assert page.input_value("#reviewer") == "Ada"
        assert page.input_value("#r3 textarea.comment") == "checked by hand, 3"
        assert page.locator("#r3 .decision").get_attribute("data-decided") == "reject"
        assert page.locator("#records li.review[data-marked=right]").count() \
            + page.locator("#records li.review[data-marked=wrong]").count() == marked
        assert page.locator("#index-rows tr[data-n='1'] td.decided").inner_text() == "approve"
        page.select_option("#f-verdict", "supported")
        csv_rows = _download(page, "#download-csv", tmp_path / "index.csv")
        marks = _download(page, "#download-marks", tmp_path / "marks.jsonl")
        _screenshot(page, tmp_path)
        assert errors == []
    assert csv_rows[0] == ("n,id,verdict,passed,score,judge,rubric,needs_look,decision,"
                           "comment,reviewer,judge_before,rubric_before,reviewers,agreement")
    assert len(csv_rows) == 1 + 1000 and csv_rows[1].startswith("1,rec-0000,supported,true,0,")
    assert ",approve,\"checked by hand, 1\",Ada," in csv_rows[1]
    rows = [json.loads(line) for line in marks]
    assert len(rows) == marked + 3 and {r["reviewer"] for r in rows} == {"Ada"}
    decided = [r for r in rows if r["response"] in (GOOD, BAD)]  # the records' own lines
    assert [(r["id"], r["decision"], r["label"]) for r in decided] == [
        ("rec-0000", "approve", False), ("rec-0001", "approve", True),
        ("rec-0002", "reject", True)]
    assert all(r["source"] == "\n\n".join(CHUNKS) for r in rows)
    assert cli.main(["calibrate", "--file", str(tmp_path / "marks.jsonl"), "--llm", "reading",
                     "--out", str(tmp_path / "cal.json"), "--cache-dir",
                     str(tmp_path / "cache")]) == 0
    assert f"examples: {marked + 3} (" in capsys.readouterr().out
