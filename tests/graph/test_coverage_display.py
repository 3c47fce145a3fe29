"""Coverage and word scores (seed 001) as users see them: conli check's text and the report."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from conli.backends import register_backend
from conli.backends.base import Message
from conli.backends.fake import ScriptedBackend
from conli.cli import app as cli
from conli.cli.check import format_text
from conli.config import Settings
from conli.models import (
    CheckResult,
    Coverage,
    Mitigation,
    PerspectiveCoverage,
    PointAddition,
    PointCheck,
    PointResult,
    WordScore,
)
from conli.pipeline import Checker
from conli.report.html import write_report
from conli.report.review import script
from tests.support.chromium import _chromium, _run_chromium
from tests.support.eval_fakes import respond
from tests.support.paths import ROOT
from tests.support.responders import rule_responder

SOURCE = ("The Riverside library opened in 1962. The city council runs it and pays its staff. "
          "It lends books free of charge. A new reading room opened in 2019.")
RESPONSE = ("The Riverside library opened in 1962. A private charity runs it with volunteers. "
            "It lends books free of charge.")
POINTS = {"history": ["The Riverside library opened in 1962",
                      "A new reading room opened in 2019"],
          "funding": ["It lends books free of charge", "Entry costs five dollars"]}
EVIL = "<script>document.body.appendChild(document.createElement('pwned-el'))</script>"


def _responder(messages: list[Message]) -> str:
    """eval_fakes' string-matching model, which also writes a coverage fix: the point itself."""
    if "You add one missing point" in messages[0]["content"]:
        point = re.findall(r"<point>(.*?)</point>", messages[-1]["content"], re.S)[-1]
        return json.dumps({"sentence": point.strip().rstrip(".") + "."})
    return respond(messages)


def _check(response: str = RESPONSE, points: Any = POINTS) -> CheckResult:
    """A check on the scripted model: overlap coverage (scored), the coverage fix, no judge."""
    settings = Settings(llm="local", detectors=["sentence_nli", "coverage_overlap"],
                        mitigate=False, judge=False, fix_coverage=True)
    return Checker(settings, ScriptedBackend(responder=_responder)).check(
        SOURCE, response, points=points)


@pytest.fixture(scope="module")
def checked() -> CheckResult:
    return _check()


def _point(perspective: str, index: int, text: str, verdict: Any, **more: Any) -> PointResult:
    return PointResult(perspective=perspective, index=index, point=text, verdict=verdict, **more)


def _word(text: str, start: int, score: float, method: Any = "semantic") -> WordScore:
    return WordScore(text=text, start=start, end=start + len(text), score=score, method=method)


SEMANTIC = [_word("Riverside", 4, 0.49), _word("private", 40, 0.5), _word("charity", 48, 0.83),
            _word("volunteers", 69, 0.2)]


def _crafted(base: CheckResult) -> CheckResult:
    """``base`` with an unverified point, semantic word scores and hostile model text."""
    failed = PointCheck(detector="coverage_nli", perspective="funding", index=1,
                        point="Entry costs five dollars", verdict="unverified",
                        error="timed out \x1b[2J")
    points = [
        _point("history", 0, "The Riverside library opened in 1962", "covered", score=1.0,
               sentence=0),
        _point("history", 1, "A new reading room opened in 2019 \u202e", "uncovered",
               score=0.2, words=[_word("reading", 6, 1.0, "lexical")]),
        _point("funding", 1, "Entry costs five dollars", "unverified", sentence=1,
               checks=[failed]),
    ]
    views = [PerspectiveCoverage(name="history", score=0.2, verdict="uncovered"),
             PerspectiveCoverage(name="funding", score=None, verdict="unverified")]
    added = [PointAddition(perspective="history", index=1, point="A new reading room",
                           sentence="A reading room \x1b]0;pwned\x07opened.", added=False,
                           verdict="hallucinated", covers="covered", note="not added \x9b31m")]
    return base.model_copy(update={
        "coverage": Coverage(verdict="uncovered", score=0.2, points=points, perspectives=views),
        "word_scores": SEMANTIC,
        "mitigation": base.mitigation.model_copy(update={"added": added})})


# --- conli check's text ----------------------------------------------------------------------


def _section(text: str, first: str) -> list[str]:
    """The lines of ``text`` from the one starting with ``first`` to the next blank line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next((i for i in range(start, len(lines)) if not lines[i]), len(lines))
    return lines[start:end]


def test_text_marks_each_point_and_the_coverage_error(checked: CheckResult) -> None:
    text = format_text(checked)
    section = _section(text, "coverage:")
    assert section[0] == "coverage: uncovered (2 of 4 points not covered), score 0.00"
    assert ("  [NO ] uncovered   history 2: A new reading room opened in 2019 "
            "(closest: sentence 1, score 0.20)") in section
    assert "        not in the response: new, reading, room, 2019" in section
    assert ("  [ok ] covered     funding 1: It lends books free of charge "
            "(sentence 3, score 1.00)") in section
    assert section[-1] == (
        "  minimum by perspective: history 0.20 (uncovered), funding 0.00 (uncovered)")


def test_text_lists_words_not_in_the_source_under_their_sentence(checked: CheckResult) -> None:
    lines = format_text(checked).splitlines()
    flagged = lines.index("[BAD] A private charity runs it with volunteers.")
    assert lines[flagged + 2] == "        words not in the source: private, charity, volunteers"
    listed = [line for line in lines if "words not in the source" in line]
    assert listed == [lines[flagged + 2]]  # the supported sentences list nothing


def test_text_shows_coverage_additions_under_the_rewrite(checked: CheckResult) -> None:
    text = format_text(checked)
    assert text.index("rewrite (") < text.index("coverage additions:")
    additions = _section(text, "coverage additions:")
    assert additions[1:3] == ["  [added] history 2: A new reading room opened in 2019",
                              "        + A new reading room opened in 2019."]
    assert ("        source: hallucinated, point: covered; not added: the source does not "
            "support it") in additions


def test_text_never_shows_an_unverified_point_as_covered(checked: CheckResult) -> None:
    text = format_text(_crafted(checked))
    row = next(line for line in text.splitlines() if "funding 2:" in line)
    assert row == ("  [?? ] unverified  funding 2: Entry costs five dollars "
                   "(closest: sentence 2)")
    assert "        could not check: timed out \\x1b[2J" in text
    assert "funding – (unverified)" in text  # the perspective's minimum is unknown, not covered


def test_text_semantic_words_are_exactly_those_from_one_half(checked: CheckResult) -> None:
    text = format_text(_crafted(checked))
    assert [line for line in text.splitlines() if "words not in the source" in line] == [
        "        words not in the source: private 0.50, charity 0.83"]


def test_text_without_points_shows_only_the_score_line(checked: CheckResult) -> None:
    result = checked.model_copy(update={"coverage": Coverage(score=0.625),
                                        "mitigation": Mitigation(status="disabled")})
    lines = format_text(result).splitlines()
    coverage = [line for line in lines if "coverage" in line]
    assert coverage == ["coverage score: 0.62 (share of the source's content words the "
                        "response uses)"]
    assert not any(line.startswith("  [") for line in lines)
    assert "coverage" not in format_text(result.model_copy(update={"coverage": None}))


def test_text_escapes_model_and_input_text(checked: CheckResult) -> None:
    text = format_text(_crafted(checked))
    assert not re.search("[\x1b\x07\x9b\u202e]", text)
    assert "\\u202e" in text and "\\x1b]0;pwned\\x07opened." in text and "\\x9b31m" in text


def test_cli_check_with_points_prints_plain_text(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    register_backend("fake", lambda arg, settings: ScriptedBackend(
        responder=rule_responder(bad=("two dollars",)), context_window=2000))
    files = {"source": "The library opened in 1962. It lends books free of charge.",
             "response": "The library opened in 1962. It charges two dollars per book.",
             "points": json.dumps(["The library opened in 1962.",
                                   "It charges two dollars \u202e per book."])}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    args = [f"--{name}={tmp_path / name}" for name in files]
    assert cli.main(["check", *args, "--llm", "fake", "--no-judge", "--no-mitigate"]) == 0
    out = capsys.readouterr().out  # captured: stdout is not a TTY
    assert not re.search("[\x1b\u202e]", out)
    assert "  [NO ] uncovered   points 2: It charges two dollars \\u202e per book." in out
    assert "  [ok ] covered     points 1: The library opened in 1962. (sentence 1" in out
    assert "        words not in the source: dollars" in out  # "charges": stem of "charge"
    assert "minimum by perspective" not in out  # one perspective


# --- the HTML report -------------------------------------------------------------------------


def _results(tmp_path: Path, *results: tuple[str, str, CheckResult]) -> Path:
    path = tmp_path / "results.jsonl"
    rows = [{"id": key, "source": SOURCE, "response": response, "ok": True,
             "result": result.model_dump(mode="json")} for key, response, result in results]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _render(path: Path) -> str:
    buffer = io.StringIO()
    written = write_report(path, buffer)
    assert written.malformed == []
    return buffer.getvalue()


def _response_div(page: str) -> str:
    return re.findall(r'<div class="text response">(.*?)</div>', page, re.S)[0]


def test_report_table_marks_the_uncovered_point(checked: CheckResult, tmp_path: Path) -> None:
    page = _render(_results(tmp_path, ("library", RESPONSE, checked)))
    row = re.search(r'<tr class="point-uncovered"><td>history 2</td><td>(.*?)</td>'
                    r'<td>(.*?)</td><td>(.*?)</td><td>(.*?)</td></tr>', page)
    assert row is not None
    point, verdict, score, sentence = row.groups()
    assert verdict == '<span class="badge uncovered">uncovered</span>' and score == "0.20"
    assert re.findall(r'<mark class="word lexical miss"[^>]*>(.*?)</mark>', point) == [
        "new", "reading", "room", "2019"]
    assert "closest: sentence 1" in sentence
    assert '<tr class="point-covered"><td>history 1</td>' in page
    assert '<h3>Coverage <span class="badge uncovered">uncovered</span>' in page
    assert "Minimum by perspective: history 0.20 (uncovered) · funding 0.00 (uncovered)" in page
    assert "<th>points uncovered / given</th><td>2 / 4</td>" in page
    assert "<h3>Coverage additions</h3>" in page
    assert "<ins>A new reading room opened in 2019.</ins>" in page
    assert "→ “Entry costs five dollars.” <span" in page  # not added: not shown as inserted


def test_report_marks_exactly_the_words_from_one_half(checked: CheckResult,
                                                      tmp_path: Path) -> None:
    page = _render(_results(tmp_path, ("lexical", RESPONSE, checked),
                            ("semantic", RESPONSE, _crafted(checked))))
    lexical, semantic = re.findall(r'<div class="text response">(.*?)</div>', page, re.S)
    marks = r'<mark class="word (\w+)"([^>]*)>(.*?)</mark>'
    assert [m[2] for m in re.findall(marks, lexical)] == [
        w.text for w in checked.word_scores if w.score >= 0.5] == [
        "private", "charity", "volunteers"]
    found = re.findall(marks, semantic)
    assert [(kind, text) for kind, _, text in found] == [("semantic", "private"),
                                                         ("semantic", "charity")]
    assert 'style="background:rgba(183,28,28,0.12)" title="not in the source: semantic ' \
        'score 0.50"' in found[0][1]
    assert "rgba(183,28,28,0.45)" in found[1][1] and "score 0.83" in found[1][1]
    # the words sit inside the flagged sentence's mark, the text around them unchanged
    assert re.sub(r"<[^>]+>", "", lexical) == RESPONSE


def test_report_escapes_points_and_shows_the_legend(checked: CheckResult,
                                                    tmp_path: Path) -> None:
    hostile = _point(f"pro {EVIL}", 0, f"It says {EVIL} \" onmouseover=\"x", "uncovered",
                     sentence=0, words=[_word("says", 3, 1.0, "lexical")])
    result = checked.model_copy(update={"coverage": Coverage(
        verdict="uncovered", score=0.0, points=[hostile],
        perspectives=[PerspectiveCoverage(name=f"pro {EVIL}", score=0.0, verdict="uncovered")])})
    page = _render(_results(tmp_path, ("evil", RESPONSE, result)))
    page = page.replace(f"<script>{script()}</script>", "")  # the page's own, by its hash
    index = re.compile(r'<script type="application/json" id="report-index">([^<>&]*)</script>')
    assert len(index.findall(page)) == 1  # the index's data, never run, nothing unescaped
    page = index.sub("", page)
    assert "<script" not in page.lower() and "&lt;script&gt;" in page
    assert '" onmouseover' not in page and "&#34; onmouseover=&#34;x" in page
    assert 'title="The Riverside library opened in 1962."' in page  # the covering sentence
    assert '<div class="legend">' in page
    assert "gradient salience (§3.2) needs a differentiable model" in page


def test_report_without_points_shows_only_the_score(checked: CheckResult, tmp_path: Path) -> None:
    result = checked.model_copy(update={"coverage": Coverage(score=0.625)})
    page = _render(_results(tmp_path, ("summary", RESPONSE, result)))
    assert "Coverage score: <b>0.62</b>" in page
    assert '<table class="coverage">' not in page and "points uncovered" not in page


@pytest.mark.integration
def test_report_with_coverage_renders_in_headless_chromium(checked: CheckResult,
                                                           tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    summary = "The Riverside library opened in 1962. It lends books free of charge."
    results = _results(tmp_path, ("library, four points", RESPONSE, checked),
                       ("library, no points", summary, _check(summary, None)))
    html_file = tmp_path / "report.html"
    html_file.write_text(_render(results), encoding="utf-8")
    dom = _run_chromium(browser, tmp_path / "profile", "--dump-dom", html_file.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    shown = re.search(r'<main id="records"[^>]*>(.*?)</main>', dom.stdout, re.S)
    assert shown is not None  # the records the page's script put on its first page
    assert len(re.findall(r'<tr class="point-uncovered">', shown.group(1))) == 2
    assert len(re.findall(r'<mark class="word lexical"', shown.group(1))) >= 3
    # CONLI_UPDATE_SCREENSHOT=1 refreshes docs/report-coverage-screenshot.png
    update = os.environ.get("CONLI_UPDATE_SCREENSHOT") == "1"
    shot = ROOT / "docs" / "report-coverage-screenshot.png" if update else tmp_path / "r.png"
    taken = _run_chromium(browser, tmp_path / "profile", f"--screenshot={shot}",
                          "--window-size=1280,1700", "--hide-scrollbars", html_file.as_uri())
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
