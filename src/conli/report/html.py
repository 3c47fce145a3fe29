"""``conli report RESULTS -o report.html``: one self-contained HTML audit file.

Each response is shown with its flagged sentences highlighted (from their offsets), the
reason and quoted evidence on hover and below, its words not in the source marked, the
points it had to cover (``report.coverage``), the rewrite as a diff of replaced runs, the
judge scores before/after (and the rubric's beside the grounded one's) with what made them,
each sentence with the chunk and span of the source its verdict rests on (``sources``),
and each sentence and record for the auditor to mark (``review``). A summary table and a
legend come first, then a toolbar and an index that the page's own script searches,
filters, sorts, pages and exports as CSV: the index is JSON data, and each record's section
an inert ``<template>`` shown a page at a time, so ten thousand records open in seconds.
The page is rendered from the Jinja templates in ``report/templates`` with autoescape on,
so every piece of input text is escaped (and never evaluated), and a Content-Security-Policy
allows one script, the page's own (by its hash), and no outside request. What is read, and
what is skipped as malformed, is ``report.records``'s part; a file with no valid record at all
is an error, and nothing is written.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, TextIO

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from jinja2.ext import Extension

from conli.errors import InputError
from conli.report.coverage import (
    Pieces,
    Word,
    additions_section,
    coverage_section,
    flagged_words,
    legend,
    marked,
)
from conli.report.records import Malformed, Record, iter_results, record_name
from conli.report.review import (
    addressed_notes,
    attention,
    judge_items,
    judges,
    provenance,
    review_rows,
    script,
    script_hash,
    sentences_of,
)
from conli.report.sources import (
    chunk_names,
    chunks_of,
    evidence_of,
    sentence_evidence,
    source_chunks,
)
from conli.run.inputs import SOURCE_JOINER

TEMPLATE_DIR = Path(__file__).parent / "templates"
_LISTED = 100  # malformed values listed by line in the summary; the rest are only counted


_OPEN, _CLOSE = re.compile(r"\{[{%#]"), re.compile(r"[}%#]\}")


class _LayoutLines(Extension):
    """In ``.html`` templates, each line's indentation and line break are layout, not output.

    The report's text blocks keep white space (``pre-wrap``), so the templates can be laid
    out readably without adding any to the page; a space that matters is written ``{{ " " }}``.
    """

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        """Join the lines, each without its indentation; a line break stays in a comment.

        So error messages keep their line numbers; inside a tag or comment that goes on
        to the next line, the break becomes a space.
        """
        if not (name or "").endswith(".html"):
            return source
        out, depth = [], 0
        for line in source.splitlines():
            depth += len(_OPEN.findall(line)) - len(_CLOSE.findall(line))
            out.append(line.lstrip() + (" " if depth > 0 else "{#\n#}"))
        return "".join(out)


@cache
def _environment() -> Environment:
    """The report's templates, autoescaped; a missing variable is an error, not ''."""
    return Environment(loader=FileSystemLoader(str(TEMPLATE_DIR)), autoescape=True,
                       undefined=StrictUndefined, extensions=[_LayoutLines])


@dataclass(frozen=True)
class Flag:
    """A flagged sentence's mark in the response: its verdict, anchor, reasons on hover."""

    verdict: str
    id: str
    title: str
    pieces: Pieces
    kind: ClassVar[str] = "flag"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _response_of(record: Record) -> str:
    """Return the original response; rebuilt from sentence offsets if the record lacks it."""
    if isinstance(record.get("response"), str):
        return str(record["response"])
    sentences = record.get("result", {}).get("sentences") or []
    chars: list[str] = []
    for s in sorted(sentences, key=lambda s: s.get("start", 0)):
        start = int(s.get("start", len(chars)))
        chars.extend(" " * max(0, start - len(chars)))
        chars[start:] = list(_text(s.get("text")))
    return "".join(chars)


def _verdict(record: Record) -> str:
    if not record.get("ok", True):
        return "error"
    result = record.get("result", {})
    if "verdict" in result:
        return str(result["verdict"])
    return "judged"


def _score(judged: Any) -> float | None:
    score = judged.get("score") if isinstance(judged, dict) else None
    if isinstance(score, int | float) and not isinstance(score, bool):
        return float(score)
    return None


def _shown(score: float | None) -> str:
    """A judge score as shown: one decimal at most (a distribution's mean), '–' if none."""
    return "–" if score is None else f"{round(score, 1):g}"


def _judged(record: Record) -> tuple[Any, Any]:
    """The judge results (before, after); judge mode gives one result, shown as both."""
    result = record.get("result", {})
    if "judge" in result:
        return result["judge"], result["judge"]
    return result.get("judge_raw"), result.get("judge_refined")


def _scores(record: Record) -> tuple[float | None, float | None]:
    """Judge scores (before, after); None where a judge gave none (emptied, unverified)."""
    before, after = _judged(record)
    return _score(before), _score(after)


def _rubric(judged: Any) -> Any:
    """The rubric judge's result in ``judge_mode`` both: the grounded one's second opinion."""
    return judged.get("second_opinion") if isinstance(judged, dict) else None


def _score_rows(record: Record) -> list[tuple[str, str, str]]:
    """The judge scores as shown, ``(judge, before, after)``: its mode's, then the rubric's."""
    before, after = _judged(record)
    if (before, after) == (None, None):
        return []
    mode = str((after or before or {}).get("mode") or "")
    rows = [(mode, _status_or_score(before), _status_or_score(after))]
    if _rubric(before) is not None or _rubric(after) is not None:
        rows.append(("rubric, second opinion", _status_or_score(_rubric(before)),
                     _status_or_score(_rubric(after))))
    return rows


def _status_or_score(judged: Any) -> str:
    """A judge result as shown: ``emptied`` or ``unverified`` by name, never as a number."""
    status = judged.get("status") if isinstance(judged, dict) else None
    return str(status) if status in ("emptied", "unverified") else _shown(_score(judged))


def _flagged(result: Record) -> list[Record]:
    return [s for s in result.get("sentences") or []
            if s.get("verdict") in ("hallucinated", "unverified")]


def highlight(response: str, sentences: list[Record], anchor: str,
              words: list[Record] | None = None) -> list[str | Word | Flag]:
    """The response as pieces, each flagged sentence a ``Flag`` at its offsets.

    ``words`` (from ``flagged_words``) are marked too, inside flagged sentences or between.
    """
    words = words or []
    out: list[str | Word | Flag] = []
    cursor = 0
    for s in sorted(sentences, key=lambda s: s.get("start", 0)):
        start, end = s.get("start"), s.get("end")
        if not (isinstance(start, int) and isinstance(end, int) and cursor <= start <= end
                <= len(response)):
            continue  # offsets that do not fit this response are not trusted
        reasons = " | ".join(_text(r) for r in s.get("reasons") or [])
        verdict = "hallucinated" if s.get("verdict") == "hallucinated" else "unverified"
        out += marked(response, cursor, start, words)
        out.append(Flag(verdict, f"{anchor}-s{int(s.get('index', 0))}", reasons,
                        marked(response, start, end, words)))
        cursor = end
    out += marked(response, cursor, len(response), words)
    return out


def word_diff(before: str, after: str) -> list[tuple[str, str]]:
    """An inline word diff as ``(op, text)``: ``equal``, removed (``del``), added (``ins``).

    Changed words next to each other, with only white space between, are one replaced run:
    all the words removed, then all the words put in, not word by word in turn.
    """
    a, b = re.split(r"(\s+)", before), re.split(r"(\s+)", after)
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    out: list[tuple[str, str]] = []
    removed, added = "", ""
    for number, (op, i1, i2, j1, j2) in enumerate(opcodes):
        between = 0 < number < len(opcodes) - 1 and not "".join(a[i1:i2]).strip()
        if op != "equal" or between:  # a space between two changes joins them
            removed, added = removed + "".join(a[i1:i2]), added + "".join(b[j1:j2])
            continue
        out += [("del", removed)] if removed else []
        out += [("ins", added)] if added else []
        removed, added = "", ""
        out.append(("equal", "".join(a[i1:i2])))
    out += [("del", removed)] if removed else []
    out += [("ins", added)] if added else []
    return out


def _findings(sentences: list[Record]) -> list[Record]:
    """Each flagged sentence with its reasons and the evidence quoted against it."""
    return [{"verdict": str(s.get("verdict")), "text": _text(s.get("text")),
             "reasons": [_text(r) for r in s.get("reasons") or []],
             "quotes": [_text(j.get("evidence")) for j in s.get("judgements") or []
                        if _text(j.get("evidence")) and j.get("verdict") != "supported"]}
            for s in sentences]


def _rewrite(result: Record, response: str) -> Record | None:
    refined = result.get("refined_text")
    if not isinstance(refined, str) or refined == response:
        return None
    return {"status": str((result.get("mitigation") or {}).get("status", "")),
            "diff": word_diff(response, refined)}


def record_view(record: Record, number: int) -> Record:
    """What ``record.html`` shows of one record, the ``number``-th shown."""
    anchor = f"r{number}"
    verdict = _verdict(record)
    result = record.get("result") or {}
    error = (record.get("error") or {}) if verdict == "error" else None
    response = _response_of(record)
    flagged = _flagged(result)
    words = flagged_words(result.get("word_scores"), len(response))
    chunks = chunks_of(record.get("source"))
    names = chunk_names(result)
    evidence = evidence_of(sentences_of(result))
    spans = sentence_evidence(evidence, chunks, anchor, names)
    return {
        "anchor": anchor, "name": record_name(record), "verdict": verdict,
        "id": str(record.get("id")), "mode": str(record.get("mode") or ""),
        "passed": result.get("passed") if isinstance(result.get("passed"), bool) else None,
        "attention": attention(record, verdict),
        "error": None if error is None else {"type": _text(error.get("type")),
                                             "message": _text(error.get("message"))},
        "response": highlight(response, flagged, anchor, words) if response else None,
        "findings": _findings(flagged),
        "coverage": coverage_section(result),
        "rewrite": _rewrite(result, response),
        "additions": additions_section(result),
        "scores": _score_rows(record),
        "reasonings": [(key, _text(judge["reasoning"])) for key, judge in judge_items(result)
                       if judge.get("reasoning")],
        "review_notes": [str(r) for j in judges(result) for r in j.get("review") or []],
        "addressed": [{"chunk": n["source"], "name": n.get("source_name"),
                       "text": _text(n.get("text"))}
                      for n in addressed_notes(result)],
        "provenance": provenance(result),
        "marks": [{**row, "evidence": spans.get(row["index"], [])} for row in review_rows(result)],
        "chunks": None if chunks is None else source_chunks(chunks, evidence, anchor, names),
    }


@dataclass
class Tally:
    """The summary's counts over the whole results file."""

    verdicts: Counter[str] = field(default_factory=Counter)
    flagged: int = 0
    rewritten: int = 0
    points: int = 0
    uncovered: int = 0
    scores: dict[str, list[float]] = field(default_factory=lambda: {"before": [], "after": []})
    emptied: int = 0
    passed: Counter[bool] = field(default_factory=Counter)
    index: list[Record] = field(default_factory=list)
    malformed: list[Malformed] = field(default_factory=list)

    def add(self, record: Record | Malformed) -> None:
        """Count one value: a record's verdict, flags, rewrites and scores, or a malformed one."""
        if isinstance(record, Malformed):
            self.malformed.append(record)
            return
        verdict = _verdict(record)
        self.verdicts[verdict] += 1
        result = record.get("result") or {}
        self.index.append(_entry(record, verdict, self.records))
        if isinstance(result.get("passed"), bool):
            self.passed[result["passed"]] += 1
        self.flagged += sum(s.get("verdict") == "hallucinated"
                            for s in result.get("sentences") or [])
        self.rewritten += len((result.get("mitigation") or {}).get("changes") or [])
        points = (result.get("coverage") or {}).get("points") or []
        self.points += len(points)
        self.uncovered += sum(p.get("verdict") == "uncovered" for p in points)
        before, after = _scores(record)
        self.scores["before"] += [before] if before else []
        self.scores["after"] += [after] if after else []
        self.emptied += (_judged(record)[1] or {}).get("status") == "emptied"

    @property
    def records(self) -> int:
        """How many valid records (malformed values not counted)."""
        return sum(self.verdicts.values())

    @property
    def needs_look(self) -> int:
        """How many records call for a human (``attention``)."""
        return sum(bool(entry["look"]) for entry in self.index)


def _entry(record: Record, verdict: str, number: int) -> Record:
    """The record's row of the page's index, which its script searches, filters and sorts.

    ``n`` numbers the records as ``record_view`` anchors them (r1, r2, ...).
    """
    result = record.get("result") or {}
    support = result.get("support_score")
    after = _judged(record)[1]
    return {"n": number, "id": record_name(record), "verdict": verdict,
            "passed": result.get("passed") if isinstance(result.get("passed"), bool) else None,
            "look": attention(record, verdict),
            "score": _score({"score": support}), "judge": _score(after),
            "rubric": _score(_rubric(after))}


def _mean(values: list[float]) -> str:
    return f"{sum(values) / len(values):.2f} (n={len(values)})" if values else "–"


def _summary(tally: Tally) -> Record:
    """The summary table's rows, the malformed values listed (``_LISTED``), the legend."""
    rows: list[tuple[str, object]] = [("records", tally.records)]
    rows += [("malformed records (skipped)", len(tally.malformed))] if tally.malformed else []
    rows += [(f"verdict: {name}", count) for name, count in sorted(tally.verdicts.items())]
    rows += [("hallucinated sentences", tally.flagged),
             ("sentences rewritten or removed", tally.rewritten),
             ("mean judge score before", _mean(tally.scores["before"])),
             ("mean judge score after", _mean(tally.scores["after"]))]
    rows += [("emptied by the rewrite (left out of the mean)", tally.emptied)] \
        if tally.emptied else []
    rows += [("passed / not passed", f"{tally.passed[True]} / {tally.passed[False]}")] \
        if tally.passed else []
    rows += [("records that need a look", tally.needs_look)]
    rows += [("points uncovered / given", f"{tally.uncovered} / {tally.points}")] \
        if tally.points else []
    return {"rows": rows, "malformed": tally.malformed[:_LISTED],
            "more": max(0, len(tally.malformed) - _LISTED), "legend": legend(),
            "verdicts": sorted(tally.verdicts)}


@dataclass(frozen=True)
class Written:
    """What ``write_report`` wrote: how many records it shows, and the values it skipped."""

    records: int
    malformed: list[Malformed]


def lines_of(malformed: list[Malformed]) -> str:
    """``lines 2, 5, …`` for a message: the first ten malformed values by line."""
    shown = ", ".join(str(m.line) for m in malformed[:10])
    return f"lines {shown}{', …' if len(malformed) > 10 else ''}"


def tally(results: Path) -> Tally:
    """Count the results file; ``InputError`` if it holds no valid record at all."""
    counts = Tally()
    for item in iter_results(results):
        counts.add(item)
    if counts.records == 0 and counts.malformed:
        first = counts.malformed[0]
        raise InputError(
            f"no valid record in {str(results)!r}: all {len(counts.malformed)} malformed "
            f"({lines_of(counts.malformed)}); line {first.line}: {first.reason}")
    if counts.records == 0:
        raise InputError(f"no records in {str(results)!r}: it is empty")
    return counts


def _views(results: Path) -> Iterator[Record]:
    number = 0
    for item in iter_results(results):
        if not isinstance(item, Malformed):
            number += 1
            yield record_view(item, number)


def write_report(results: Path, out: TextIO, *, title: str = "conli audit report",
                 counts: Tally | None = None) -> Written:
    """Write the whole HTML document to ``out``, record by record; malformed values skipped.

    ``InputError`` before anything is written if ``results`` has no valid record.
    """
    counts = counts or tally(results)
    page = _environment().get_template("page.html")
    with results.open("rb") as handle:  # the marks a browser keeps are this file's
        identity = f"{results.name}:{hashlib.file_digest(handle, 'sha256').hexdigest()[:16]}"
    for chunk in page.generate(title=title, file_name=results.name, summary=_summary(counts),
                               index=counts.index, identity=identity, joiner=SOURCE_JOINER,
                               records=_views(results), script=script(),
                               script_hash=script_hash()):
        out.write(chunk)
    return Written(counts.records, counts.malformed)
