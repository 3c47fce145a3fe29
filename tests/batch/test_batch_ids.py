"""Unusual record ids cannot break a batch's outputs or its report (issue 62.5 and 62.7).

Ids with control characters, U+FFFE/U+FFFF and a lone surrogate: ``--junit`` writes XML a
strict parser reads, the failing-ids line on stderr shows them as escapes on one line (a
terminal cannot be driven by an id), batch ends with the gate's exit code, and ``conli
report`` shows every record, the odd ones too. Ids that would be spreadsheet formulas
(after spaces, or on a later line of the cell) leave the report's CSV, downloaded in a
real Chromium, as text.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from xml.etree import ElementTree

import pytest

from conli.cli.app import main
from tests.support.chromium import launched

SOURCE = "The library opened in 1962. It lends books free of charge."
BAD = "The library opened in 1962. It charges FALSE two dollars."
ODD = ["esc\x1b[31mred", "nul\x00byte", "new\nline", "bell\x07", "non\ufffechar",
       "non\uffffchar", "lone\ud800surrogate", "bidi\u202eevil"]


pytestmark = pytest.mark.usefixtures("fake")


def test_odd_ids_keep_junit_xml_the_failing_ids_line_and_the_report_whole(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = ODD + [f"plain-{i}" for i in range(18 - len(ODD))]
    src, out, junit = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "conli.xml"
    src.write_text("".join(json.dumps({"id": name, "source": SOURCE, "response": BAD}) + "\n"
                           for name in ids))
    code = main(["batch", str(src), str(out), "--mode", "check", "--llm", "fake",
                 "--no-progress", "--fail-on", "hallucinated", "--junit", str(junit)])
    err = capsys.readouterr().err
    assert code == 4, err  # the gate failed: the exit code the table gives, no traceback
    cases = ElementTree.parse(junit).getroot().findall(".//testcase")  # strict: it parses
    names = [case.get("name") for case in cases]
    assert len(names) == len(ids) and all(case.find("failure") is not None for case in cases)
    assert names[:len(ODD)] == ["esc\\x1b[31mred", "nul\\x00byte", "new\nline", "bell\\x07",
                                "non\\ufffechar", "non\\uffffchar", "lone\\ud800surrogate",
                                "bidi\\u202eevil"]  # a bidi override shown, not obeyed
    (line,) = [x for x in err.splitlines() if "failing id(s)" in x]
    assert line.startswith("conli: 18 failing id(s): esc\\x1b[31mred, nul\\x00byte, "
                           "new\\nline, bell\\x07")
    assert "lone\\ud800surrogate" in line and "bidi\\u202eevil" in line
    assert not any(c in err for c in "\x1b\x00\x07\u202e")

    assert main(["report", str(out), "-o", str(tmp_path / "report.html")]) == 0
    said = capsys.readouterr()
    assert "18 records" in said.out and "malformed" not in said.err
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "lone\ufffdsurrogate" in page and all(f"plain-{i}" in page for i in range(10))


FORMULAS = [" =1+1", "ok\n=HYPERLINK(\"http://x\")", "\t@SUM(1)", "two\r\n  -2+3", "+cmd"]


@pytest.mark.integration
def test_the_report_csv_keeps_formula_ids_as_text_in_every_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("playwright.sync_api")
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser_path is None:
        pytest.skip("chromium is not installed")
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"id": name, "source": SOURCE, "response": BAD}) + "\n"
                           for name in [*FORMULAS, "plain"]))
    assert main(["batch", str(src), str(out), "--mode", "check", "--llm", "fake",
                 "--no-progress"]) == 0
    assert main(["report", str(out), "-o", str(tmp_path / "report.html")]) == 0
    capsys.readouterr()
    with launched() as browser:
        page = browser.new_page(accept_downloads=True)
        page.goto((tmp_path / "report.html").as_uri())
        with page.expect_download() as info:
            page.click("#download-csv")
        info.value.save_as(tmp_path / "index.csv")
    with (tmp_path / "index.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    cells = {row["id"] for row in rows}
    assert cells == {"' =1+1", "ok\n'=HYPERLINK(\"http://x\")", "'\t@SUM(1)",
                     "two\r\n'  -2+3", "'+cmd", "plain"}
