"""An auditor's marks in a real headless Chromium teach the checker: click, download, calibrate.

The report of a ``conli batch`` run is opened from its file; the test clicks each sentence's
"right" or "wrong" as an auditor who knows the truth would, downloads the marks through the
page's own button, and hands the file to ``conli calibrate`` as it is. The calibration then
changes the verdict on a held case the marks never saw.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conli.backends import register_backend
from conli.cli import app as cli
from tests.readers import ReadingBackend

SOURCE = "The library opened in 1921. It holds 40,000 books. The mayor attended the opening."
GOOD = "The library opened in 1921. It holds 40,000 books."
BAD = "The library opened in 1921. It holds 90,000 books."
HELD = "The mayor attended the opening."  # in no marked record

playwright = pytest.importorskip("playwright.sync_api")
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(BROWSER is None,
                                reason="chromium is not installed (apt-get install -y chromium)")


@pytest.fixture(autouse=True)
def reading_backend() -> None:
    register_backend("reading", lambda _arg, _settings: ReadingBackend())


def _report(tmp_path: Path) -> Path:
    """``conli batch`` over 12 records, then ``conli report``: the auditor's page."""
    records = [{"id": f"a{i}", "source": SOURCE, "response": BAD if i % 2 else GOOD}
               for i in range(12)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert cli.main(["batch", str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl"),
                     "--llm", "reading", "--no-progress"]) == 0
    assert cli.main(["report", str(tmp_path / "out.jsonl"), "-o",
                     str(tmp_path / "report.html")]) == 0
    return tmp_path / "report.html"


def _mark_and_download(page_file: Path, target: Path) -> int:
    """Mark every sentence as the truth has it (only 90,000 is wrong); save the download."""
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=BROWSER, args=["--no-sandbox"])
        try:
            page = browser.new_page(accept_downloads=True)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error"
                    else None)
            page.goto(page_file.as_uri())
            assert page.locator("#download-marks").is_disabled()
            for summary in page.locator("details.marks > summary").all():
                summary.click()
            rows = page.locator("li.review").all()
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
        finally:
            browser.close()


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
    marked = _mark_and_download(_report(tmp_path), marks)
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
