"""conli report: a self-contained, escaped HTML audit file, checked in headless Chromium."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conli.batch import make_worker, run
from conli.cli import main
from conli.config import Settings
from conli.report import write_report
from tests import scripted

ROOT = Path(__file__).resolve().parent.parent
EVIL = "<script>document.body.appendChild(document.createElement('pwned-el'))</script>"
IMG = '<img src=x onerror="document.body.appendChild(document.createElement(\'pwned-img\'))">'
SOURCE = f"The Riverside library opened in 1962. The city council runs it. {EVIL}"


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """Batch results (rewrite mode with the judge) for benign and malicious records."""
    records = [
        {"id": "plain", "source": SOURCE, "response": "The library opened in 1962."},
        {"id": "flagged", "source": SOURCE,
         "response": "The library opened in 1962. A FALSE charity runs it. It has a cafe."},
        {"id": f"evil {EVIL}", "source": SOURCE,
         "response": f"The library opened in 1962. {EVIL} is FALSE. The \"tag\" {IMG} FALSE."},
        {"id": "broken", "source": SOURCE, "response": ""},
    ]
    src, out = tmp_path / "in.jsonl", tmp_path / "results.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    settings = Settings(nli_prompt="v1")  # v1 answers quote the evidence shown below
    work = make_worker(settings, "rewrite", scripted.backend(), with_judge=True)
    run(src, out, work, concurrency=1, progress=False)
    return out


def _render(results: Path) -> str:
    buffer = io.StringIO()
    write_report(results, buffer)
    return buffer.getvalue()


def _flagged_sentences(results: Path) -> list[str]:
    rows = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    return [s["text"] for r in rows if r["ok"] for s in r["result"]["sentences"]
            if s["verdict"] == "hallucinated"]


def test_report_highlights_explains_diffs_and_scores(results: Path) -> None:
    page = _render(results)
    flagged = _flagged_sentences(results)
    marks = re.findall(r'<mark class="flag hallucinated" id="[^"]+" title="([^"]*)">', page)
    assert len(marks) == len(flagged) == 3
    assert all("contradiction: contradicted by the source" in title for title in marks)
    assert "<del>FALSE</del>" in page and "<ins>true</ins>" in page  # the rewrite as a diff
    assert re.search(r"before <b>2</b> → after <b>5</b>", page)  # judge before/after
    assert '<table class="summary">' in page and "<th>verdict: error</th><td>1</td>" in page
    assert "EmptyInputError" in page
    assert "<blockquote>“quoted source”</blockquote>" in page  # the evidence, below
    # and on hover, marked: the scripted quote is not in the source
    assert all("not found in the source: &quot;quoted source&quot;" in title for title in marks)


def test_report_escapes_every_input_and_is_self_contained(results: Path) -> None:
    page = _render(results)
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert "&lt;script&gt;" in page and "&lt;img src=x onerror=" in page
    assert 'title="' in page and '"tag"' not in page  # quotes escaped inside attributes too
    assert not re.search(r'\b(src|href)\s*=\s*"', page)  # no external assets at all
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_cli_report_writes_the_file(results: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    assert main(["report", str(results), "-o", str(target)]) == 0
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert main(["report", str(tmp_path / "missing.jsonl"), "-o", str(target)]) == 2


# --- malformed records: skipped, counted, never a crash ---------------------------------------

Row = dict[str, Any]


def _rows(results: Path) -> list[Row]:
    return [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]


def _row(results: Path, key: str) -> Row:
    return next(row for row in _rows(results) if row["id"] == key)


def _every_sentence(row: Row, **change: Any) -> Row:
    sentences = [{**s, **change} for s in row["result"]["sentences"]]
    return {**row, "result": {**row["result"], "sentences": sentences}}


def _without_response(row: Row) -> Row:
    return {k: v for k, v in _every_sentence(row, start=10**20).items() if k != "response"}


MALFORMED: dict[str, Callable[[Row], str]] = {
    "result not an object": lambda row: json.dumps({**row, "result": "x"}),
    "sentence index not an integer": lambda row: json.dumps(_every_sentence(row, index="abc")),
    "error not an object": lambda row: json.dumps({**row, "ok": False, "error": "x"}),
    "result missing keys": lambda row: json.dumps({**row, "result": {"verdict": "supported"}}),
    "judge result not an object": lambda row: json.dumps({**row, "result": {"judge": "x"}}),
    "offsets far out of range": lambda row: json.dumps(_without_response(row)),
    "not JSON": lambda row: "{not json at all",
    "not a JSON object": lambda row: "[1, 2, 3]",
    "nested too deep": lambda row: "[" * 100_000,
}


def _summary_row(page: str, name: str) -> str | None:
    found = re.search(rf"<tr><th>{re.escape(name)}</th><td>([^<]*)</td></tr>", page)
    return found.group(1) if found else None


def _sections(page: str) -> list[str]:
    return re.findall(r'<section class="rec".*?</section>', page, re.S)


@pytest.mark.parametrize("make", MALFORMED.values(), ids=MALFORMED.keys())
def test_report_skips_and_counts_a_malformed_record(
    results: Path, tmp_path: Path, make: Callable[[Row], str]
) -> None:
    good = _row(results, "flagged")
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(f"{json.dumps(good)}\n{make(good)}\n", encoding="utf-8")
    page = _render(mixed)
    assert _summary_row(page, "records") == "1"
    assert _summary_row(page, "malformed records (skipped)") == "1"
    assert "<li>line 2: " in page  # which line, and why
    assert len(_sections(page)) == 1 and '<mark class="flag hallucinated"' in page


def test_report_renders_good_lines_among_malformed_ones(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows(results)
    bad = [make(rows[1]) for make in MALFORMED.values()]
    lines = [json.dumps(rows[0]), *bad[:4], *map(json.dumps, rows[1:3]), *bad[4:],
             json.dumps(rows[3])]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    clean, page = _render(results), _render(mixed)
    assert _sections(page) == _sections(clean)  # every good record, exactly as alone
    assert _summary_row(page, "records") == _summary_row(clean, "records") == "4"
    assert _summary_row(page, "malformed records (skipped)") == str(len(MALFORMED))
    assert page.count("<li>line ") == len(MALFORMED)
    assert _summary_row(clean, "malformed records (skipped)") is None
    assert "malformed" not in clean

    target = tmp_path / "report.html"
    assert main(["report", str(mixed), "-o", str(target)]) == 0
    err = capsys.readouterr().err
    assert f"malformed records skipped: {len(MALFORMED)} (lines " in err
    assert target.read_text(encoding="utf-8") == page


def test_report_accepts_a_bare_check_result_and_judge_mode(results: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps(_row(results, "flagged")["result"]) + "\n", encoding="utf-8")
    page = _render(bare)
    assert _summary_row(page, "records") == "1" and len(_sections(page)) == 1
    assert "malformed" not in page and '<mark class="flag hallucinated"' in page
    judged = tmp_path / "judged.jsonl"
    row = _row(results, "plain")
    only = {"judge": row["result"]["judge_raw"], "usage": row["result"]["usage"]}
    judged.write_text(json.dumps({**row, "mode": "judge", "result": only}) + "\n",
                      encoding="utf-8")
    page = _render(judged)
    assert "malformed" not in page and re.search(r"before <b>\d</b> → after <b>\d</b>", page)


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run_chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}"]
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=120)


def test_report_renders_in_headless_chromium(results: Path, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    html_file = tmp_path / "report.html"
    html_file.write_text(_render(results), encoding="utf-8")
    dom = _run_chromium(browser, tmp_path / "profile", "--dump-dom", html_file.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    unmarked = re.sub(r'<mark class="word [^>]*>(.*?)</mark>', r"\1", dom.stdout)  # words
    marks = re.findall(r'<mark class="flag hallucinated"[^>]*>(.*?)</mark>', unmarked, re.S)
    assert len(marks) == 3
    assert any("A FALSE charity runs it." in m for m in marks)
    assert "<pwned-el" not in dom.stdout and "<pwned-img" not in dom.stdout  # nothing ran
    assert "<del>" in dom.stdout and "<ins>" in dom.stdout

    # CONLI_UPDATE_SCREENSHOT=1 refreshes docs/report-screenshot.png; by default the test
    # leaves tracked files alone (the PNG's bytes differ on every render)
    update = os.environ.get("CONLI_UPDATE_SCREENSHOT") == "1"
    shot = ROOT / "docs" / "report-screenshot.png" if update else tmp_path / "report.png"
    taken = _run_chromium(browser, tmp_path / "profile", f"--screenshot={shot}",
                          "--window-size=1280,1800", "--hide-scrollbars", html_file.as_uri())
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
