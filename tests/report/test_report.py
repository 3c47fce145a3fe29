"""conli report: a self-contained, escaped HTML audit file, checked in headless Chromium."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conli.backends import register_backend
from conli.batch.local import run
from conli.batch.work import make_worker
from conli.cli.app import main
from conli.config import Settings
from conli.report.html import write_report
from conli.report.review import script, script_hash
from tests.support import scripted
from tests.support.chromium import _chromium, _run_chromium
from tests.support.paths import ROOT

EVIL = "<script>document.body.appendChild(document.createElement('pwned-el'))</script>"
IMG = '<img src=x onerror="document.body.appendChild(document.createElement(\'pwned-img\'))">'
SOURCE = f"The Riverside library opened in 1962. The city council runs it. {EVIL}"
Row = dict[str, Any]


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
    # v1 answers quote the evidence shown below; the rubric judge gives the 2 and 5 shown
    settings = Settings(nli_prompt="v1", judge_mode="rubric")
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
    assert all("not found in the source: &#34;quoted source&#34;" in title for title in marks)


INDEX = re.compile(r'<script type="application/json" id="report-index">(.*?)</script>', re.S)


def _index(page: str) -> list[Row]:
    """The page's index data: one JSON block, its ``<``, ``>`` and ``&`` escaped."""
    blocks = INDEX.findall(page)
    assert len(blocks) == 1 and not re.search(r"[<>&]", blocks[0])
    rows: list[Row] = json.loads(blocks[0])
    return rows


def _without_own_script(page: str) -> str:
    """The page less its one script, allowed by its hash, and its index data, never run."""
    own = f"<script>{script()}</script>"
    assert page.count(own) == 1 and script_hash() in page
    _index(page)
    return INDEX.sub("", page.replace(own, ""))


def test_report_escapes_every_input_and_is_self_contained(results: Path) -> None:
    page = _without_own_script(_render(results))
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert "&lt;script&gt;" in page and "&lt;img src=x onerror=" in page
    assert 'title="' in page and '"tag"' not in page  # quotes escaped inside attributes too
    assert not re.search(r'\b(src|href)\s*=\s*"(?!#r\d+")', page)  # only in-page links
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_cli_report_writes_the_file(results: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    assert main(["report", str(results), "-o", str(target)]) == 0
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert main(["report", str(tmp_path / "missing.jsonl"), "-o", str(target)]) == 2


# --- malformed records: skipped, counted, never a crash ---------------------------------------


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


def test_report_opens_with_the_records_that_need_a_look(results: Path, tmp_path: Path) -> None:
    flagged, plain = _row(results, "flagged"), _row(results, "plain")
    judge = plain["result"]["judge_raw"]
    audit = {"judged_at": "2026-11-26T10:00:00Z", "conli_version": "9.9", "commit": "abc1234",
             "backend": "scripted", "model": "m", "detectors": ["fused"],
             "artifacts": {"fused": "fused.v1"}, "template": "grounded.v1", "sentences": []}
    review = {**plain, "id": "disputed", "result": {**plain["result"], "judge_refined": {
        **judge, "review": ["the rubric judge differs by 2.0"], "audit": audit}}}
    emptied = {**plain, "id": "emptied", "result": {**plain["result"], "judge_refined": {
        **judge, "status": "emptied", "score": None}}}
    path = tmp_path / "audit.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (plain, flagged, review, emptied)),
                    encoding="utf-8")
    page = _render(path)
    listed = [(f"r{row['n']}", row["id"], row["look"]) for row in _index(page) if row["look"]]
    assert listed == [("r2", "flagged", ["hallucinated"]),
                      ("r3", "disputed", ["review: the rubric judge differs by 2.0"]),
                      ("r4", "emptied", ["emptied by the rewrite"])]
    assert all(f'<template id="t-{anchor}"><section class="rec" id="{anchor}"' in page
               for anchor, _, _ in listed)  # each row's record, for the page to show
    assert _summary_row(page, "records that need a look") == "3"
    assert _summary_row(page, "emptied by the rewrite (left out of the mean)") == "1"
    assert _summary_row(page, "mean judge score after").endswith("(n=3)")
    assert "after <b>emptied</b>" in page and "for review: the rubric judge differs" in page
    assert "<th>commit</th>" not in page and "<th>conli</th><td>9.9 abc1234</td>" in page
    assert "<th>artifacts</th><td>fused: fused.v1</td>" in page


# --- what conli report reads: check --json as written, batch's error records ---------------


def _conli(*args: str) -> subprocess.CompletedProcess[str]:
    """``conli ARGS`` in a process of its own, no terminal; the ``fake`` backend registered."""
    return subprocess.run(
        [sys.executable, "-m", "tests.support.cli_runner", *args], cwd=ROOT, capture_output=True,
        text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "CONLI_TEST_FAKE": "1", "PYTHONPATH": str(ROOT)})


def _check_json(tmp_path: Path, name: str, response: str) -> Path:
    """``conli check --json -o NAME.json``: the indented result, as the CLI writes it."""
    register_backend("fake", lambda _arg, _settings: scripted.backend())
    source, answer, out = (tmp_path / f"{name}.{part}" for part in ("src", "txt", "json"))
    source.write_text(SOURCE, encoding="utf-8")
    answer.write_text(response, encoding="utf-8")
    assert main(["check", "--source", str(source), "--response", str(answer), "--llm", "fake",
                 "--json", "-o", str(out)]) == 0
    return out


@pytest.mark.integration
def test_cli_report_reads_check_json_as_written(tmp_path: Path) -> None:
    one = _check_json(tmp_path, "one", "The library opened in 1962. A FALSE charity runs it.")
    two = _check_json(tmp_path, "two", "The library opened in 1962.")
    assert one.read_text(encoding="utf-8").count("\n") > 20  # indented over many lines
    both = tmp_path / "both.json"  # as `cat one.json two.json > both.json` leaves them
    both.write_bytes(one.read_bytes() + two.read_bytes())
    target = tmp_path / "report.html"
    done = _conli("report", str(both), "-o", str(target))
    assert done.returncode == 0, done.stderr
    assert "2 records" in done.stdout and "malformed" not in done.stderr
    page = target.read_text(encoding="utf-8")
    assert _summary_row(page, "records") == "2" and len(_sections(page)) == 2
    unmarked = re.sub(r'<mark class="word [^>]*>(.*?)</mark>', r"\1", page)  # words
    marks = re.findall(r'<mark class="flag hallucinated"[^>]*>(.*?)</mark>', unmarked)
    assert marks == ["A FALSE charity runs it."]
    assert _summary_row(page, "verdict: supported") == "1"


def test_report_reads_indented_and_line_values_and_skips_a_torn_one(tmp_path: Path) -> None:
    result = json.loads(_check_json(tmp_path, "one", "A FALSE charity runs it.").read_text())
    pretty = json.dumps(result, indent=2)
    mixed = tmp_path / "mixed.json"
    mixed.write_text(f"{pretty}\n\n{json.dumps(result)}\n{{\n{pretty[: len(pretty) // 2]}",
                     encoding="utf-8")
    page = _render(mixed)
    assert _summary_row(page, "records") == "2" and len(_sections(page)) == 2
    assert _summary_row(page, "malformed records (skipped)") == "2"
    stray, torn = pretty.count("\n") + 4, pretty.count("\n") + 5  # a blank line between
    for line in (stray, torn):  # the stray "{" holds nothing, and the torn one never closes
        assert f"<li>line {line}: not valid JSON: the value that starts here never ends" in page


def test_cli_report_shows_batch_error_records_as_failed(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    good = {"id": "good", "source": SOURCE, "response": "A FALSE charity runs it."}
    src.write_text("\n".join([json.dumps(good), "{not json", json.dumps(good),
                              json.dumps({**good, "id": "empty", "response": " "})]) + "\n",
                   encoding="utf-8")
    work = make_worker(Settings(), "check", scripted.backend())
    run(src, out, work, concurrency=1, progress=False)
    assert [r["ok"] for r in _rows(out)].count(False) == 3  # batch's own error records
    target = tmp_path / "report.html"
    assert main(["report", str(out), "-o", str(target)]) == 0
    page = target.read_text(encoding="utf-8")
    assert _summary_row(page, "records") == "4" and "malformed" not in page
    assert _summary_row(page, "verdict: error") == "3"
    headings = re.findall(r"<h2>(.*?) <span", page)
    assert sorted(headings) == ["empty", "good", "input line 2", "input line 3"]
    assert "<b>InputError</b>: line 2 is not valid JSON" in page
    assert "<b>InputError</b>: line 3 repeats the id of line 1" in page
    assert "<b>EmptyInputError</b>: " in page


@pytest.mark.parametrize("content", ["{not json\n[1, 2]\n\n", "", "\n  \n"],
                         ids=["all malformed", "empty", "blank"])
def test_report_without_a_valid_record_fails_and_writes_nothing(
    tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content, encoding="utf-8")
    kept, fresh = tmp_path / "kept.html", tmp_path / "fresh.html"
    kept.write_text("an earlier report", encoding="utf-8")
    for target in (kept, fresh):
        assert main(["report", str(bad), "-o", str(target)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("conli: error: no ") and "bad.jsonl" in err
    assert "all 2 malformed (lines 1, 2); line 1: not valid JSON" in err \
        if content.startswith("{") else "it is empty" in err
    assert kept.read_text(encoding="utf-8") == "an earlier report" and not fresh.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "kept.html"]


@pytest.mark.integration
def test_cli_report_of_only_malformed_records_exits_2_in_its_own_process(tmp_path: Path) -> None:
    bad, target = tmp_path / "bad.jsonl", tmp_path / "report.html"
    bad.write_text('{"id": 1}\n', encoding="utf-8")
    done = _conli("report", str(bad), "-o", str(target))
    assert done.returncode == 2 and done.stdout == "" and not target.exists()
    assert done.stderr == (f"conli: error: no valid record in {str(bad)!r}: all 1 malformed "
                           "(lines 1); line 1: record: Value error, a record with ok true "
                           "needs a result\n")


HOSTILE = ('<script>document.title="pwned"</script> "><img src=x onerror=alert(1)> '
           "{{ 7*7 }} {% if true %}IF{% endif %} {# c #}")


def test_report_escapes_hostile_text_and_never_evaluates_it(results: Path,
                                                            tmp_path: Path) -> None:
    row = _row(results, "flagged")
    sentences = [{**s, "reasons": [HOSTILE, *s["reasons"]]} for s in row["result"]["sentences"]]
    judge = {**row["result"]["judge_raw"], "reasoning": HOSTILE}
    hostile = {**row, "id": HOSTILE, "mode": HOSTILE, "source": HOSTILE,
               "result": {**row["result"], "sentences": sentences, "judge_raw": judge}}
    failed = {"id": 7, "ok": False, "response": f"{HOSTILE} FALSE.",
              "error": {"type": HOSTILE, "message": HOSTILE}}
    path = tmp_path / "hostile.jsonl"
    path.write_text(f"{json.dumps(hostile)}\n{json.dumps(failed)}\n", encoding="utf-8")
    full = _render(path)
    assert [row["id"] for row in _index(full)] == [HOSTILE, "7"]  # as data, escaped, not run
    page = _without_own_script(full)
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    shown = "{{ 7*7 }} {% if true %}IF{% endif %} {# c #}"  # as written, not evaluated
    flagged = sum(s["verdict"] == "hallucinated" for s in sentences)
    # id (heading, section data), mode, source, each flag's title and listed reason,
    # the judge, the failed record's response, error type and message
    places = 4 + 2 * flagged + 1 + 3
    assert page.count(shown) == places
    # nothing evaluated 7*7 (the provenance table's commit hash and the page's identity, the
    # results file's hash, may hold any digits)
    unsigned = re.sub(r'<table class="provenance">.*?</table>|data-report="[^"]*"'
                      r'|data-results-sha256="[^"]*"', "", page, flags=re.S)
    assert "49" not in unsigned.replace("#49", "")


@pytest.mark.integration
def test_report_renders_in_headless_chromium(results: Path, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    html_file = tmp_path / "report.html"
    html_file.write_text(_render(results), encoding="utf-8")
    dom = _run_chromium(browser, tmp_path / "profile", "--dump-dom", html_file.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    shown = re.search(r'<main id="records"[^>]*>(.*?)</main>', dom.stdout, re.S)
    assert shown is not None  # the page's script put the first page of records in
    unmarked = re.sub(r'<mark class="word [^>]*>(.*?)</mark>', r"\1", shown.group(1))
    marks = re.findall(r'<mark class="flag hallucinated"[^>]*>(.*?)</mark>', unmarked, re.S)
    assert len(marks) == 3
    assert any("A FALSE charity runs it." in m for m in marks)
    assert "<pwned-el" not in dom.stdout and "<pwned-img" not in dom.stdout  # nothing ran
    assert "<del>" in shown.group(1) and "<ins>" in shown.group(1)
    assert len(re.findall(r"<tr data-n=", dom.stdout)) == 4  # the index's rows

    # docs/report-screenshot.png is test_report_marks' (the filters at work, 2,000 records)
    shot = tmp_path / "report.png"
    taken = _run_chromium(browser, tmp_path / "profile", f"--screenshot={shot}",
                          "--window-size=1280,1800", "--hide-scrollbars", html_file.as_uri())
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
