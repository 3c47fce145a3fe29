"""Safe terminal output: text from a response or a model is shown, never obeyed, by the terminal.

A response or a model's reason can hold escape sequences (colours, cursor moves, window
titles), BEL, a carriage return that overwrites what came before, or bidi controls that make
text read differently from what it is. ``printable`` turns those into visible escapes.
The coverage and word-score sections of ``conli check``'s text output are built here too,
every input-derived string through ``printable``; they are plain text, never coloured.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from conli.models import (
    WORD_FLAG,
    Coverage,
    CoverageVerdict,
    PointAddition,
    PointResult,
    SentenceResult,
    WordScore,
)
from conli.text.escapes import escaped


def printable(text: str) -> str:
    r"""Show control characters as escapes (``\x1b``, ``\u202e``): the terminal cannot act on them.

    Newline, tab and every other character, ASCII or not, are returned unchanged.
    """
    return escaped(text)


def inline(text: str) -> str:
    r"""``printable`` text that stays on one line: newline, CR and tab shown as escapes too.

    For a name in a list (a record's id), where a newline would start a line of its own.
    """
    return printable(text).replace("\t", "\\t").replace("\n", "\\n")


# --- coverage and word scores (seed 001), as ``conli check`` prints them ----------------------

_COVER_MARK = {"covered": "ok ", "uncovered": "NO ", "unverified": "?? "}
_INDENT = "        "


def one_line(text: str) -> str:
    """``printable`` text with its runs of whitespace, newlines included, made one space."""
    return " ".join(printable(text).split())


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _cover_verdict(verdict: str | None) -> CoverageVerdict:
    """A verdict to show: anything but covered or uncovered reads unverified, never covered."""
    if verdict == "covered":
        return "covered"
    return "uncovered" if verdict == "uncovered" else "unverified"


def flagged_words(words: Iterable[WordScore], start: int = 0,
                  end: int | None = None) -> list[WordScore]:
    """The words scoring at least ``WORD_FLAG`` whose span lies within ``[start, end)``."""
    return [w for w in words if w.score >= WORD_FLAG and start <= w.start
            and (end is None or w.end <= end)]


def word_line(words: Sequence[WordScore], label: str) -> list[str]:
    """One indented line naming ``words`` (semantic ones with their score), or none."""
    if not words:
        return []
    shown = [printable(w.text) + (f" {w.score:.2f}" if w.method == "semantic" else "")
             for w in words]
    return [f"{_INDENT}{label}: {', '.join(shown)}"]


def sentence_words(words: Sequence[WordScore], sentence: SentenceResult) -> list[str]:
    """The sentence's words that are not in the source, as one line under the sentence."""
    return word_line(flagged_words(words, sentence.start, sentence.end),
                     "words not in the source")


def _covered_by(point: PointResult) -> str:
    """Which response sentence (numbered from 1) covers the point, or is closest to it."""
    if point.sentence is None:
        return ""
    where = "sentence" if _cover_verdict(point.verdict) == "covered" else "closest: sentence"
    return f"{where} {point.sentence + 1}"


def point_lines(point: PointResult) -> list[str]:
    """A point with its verdict, then its missing words and why it is unverified, if so."""
    verdict = _cover_verdict(point.verdict)
    notes = [_covered_by(point)] if point.sentence is not None else []
    notes += [f"score {_score(point.score)}"] if point.score is not None else []
    tail = f" ({', '.join(notes)})" if notes else ""
    lines = [f"  [{_COVER_MARK[verdict]}] {verdict:<10}  {one_line(point.perspective)} "
             f"{point.index + 1}: {one_line(point.point)}{tail}"]
    if verdict != "covered":
        lines += word_line(flagged_words(point.words), "not in the response")
    errors = [c.error for c in point.checks if c.error]
    if verdict == "unverified" and errors:
        lines.append(f"{_INDENT}could not check: {one_line(errors[0])}")
    return lines


def coverage_lines(coverage: Coverage | None) -> list[str]:
    """The coverage section: each point and the response's verdict, or the score alone."""
    if coverage is None:
        return []
    if not coverage.points:
        return ["", f"coverage score: {_score(coverage.score)} "
                "(share of the source's content words the response uses)"]
    missing = sum(_cover_verdict(p.verdict) != "covered" for p in coverage.points)
    lines = ["", f"coverage: {_cover_verdict(coverage.verdict)} ({missing} of "
             f"{len(coverage.points)} points not covered), score {_score(coverage.score)}"]
    for point in coverage.points:
        lines += point_lines(point)
    if len(coverage.perspectives) > 1:
        views = ", ".join(f"{one_line(v.name)} {_score(v.score)} ({_cover_verdict(v.verdict)})"
                          for v in coverage.perspectives)
        lines.append(f"  minimum by perspective: {views}")
    return lines


def addition_lines(additions: Sequence[PointAddition]) -> list[str]:
    """The sentences ``--fix-coverage`` wrote, whether each was added, and why not."""
    if not additions:
        return []
    lines = ["", "coverage additions:"]
    for a in additions:
        lines.append(f"  [{'added' if a.added else 'not added'}] {one_line(a.perspective)} "
                     f"{a.index + 1}: {one_line(a.point)}")
        if a.sentence:
            lines.append(f"{_INDENT}+ {one_line(a.sentence)}")
        if not a.added:
            checks = f"source: {a.verdict or '–'}, point: {a.covers or '–'}"
            note = f"; {one_line(a.note)}" if a.note else ""
            lines.append(f"{_INDENT}{checks}{note}")
    return lines
