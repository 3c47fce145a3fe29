"""``conli report RESULTS.jsonl -o report.html``: one self-contained HTML audit file.

Each response is shown with its flagged sentences highlighted (from their offsets), the
reason and quoted evidence on hover and below, its words not in the source marked, the
points it had to cover (``report_coverage``), the rewrite as a word diff, and the judge
scores before/after; a summary table and a legend come first. Every piece of input text
is escaped, and a Content-Security-Policy forbids scripts and outside requests. A line that is not a
valid record (``BatchRecord``) is skipped, and counted and listed in the summary.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Annotated, Any, TextIO

from pydantic import BaseModel, Discriminator, Tag, ValidationError, model_validator

from conli.errors import InputError
from conli.files import atomic_writer
from conli.frontdoor import JudgeOnlyResult
from conli.models import CheckResult
from conli.report_coverage import CSS as _COVERAGE_CSS
from conli.report_coverage import additions_section, coverage_section, flagged_words, legend, marked

Record = dict[str, Any]
_MAX_OFFSET = 10_000_000  # far past any response conli checks; bounds a rebuilt response
_LISTED = 100  # malformed lines listed by number in the summary; the rest are only counted

_CSS = """
body{font:15px/1.55 system-ui,sans-serif;margin:2rem auto;max-width:60rem;color:#1d1d1f;
padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.1rem;margin:0 0 .5rem}
table{border-collapse:collapse;margin:1rem 0}
td,th{border:1px solid #ccc;padding:.3rem .7rem;text-align:left}
section.rec{border:1px solid #ddd;border-radius:8px;padding:1rem 1.2rem;margin:1.2rem 0}
.badge{display:inline-block;border-radius:4px;padding:0 .45rem;font-size:.85rem;color:#fff}
.supported{background:#2e7d32}.hallucinated{background:#c62828}.unverified{background:#8d6e00}
.error{background:#555}
.text{white-space:pre-wrap;background:#fafafa;border-left:3px solid #ccc;padding:.6rem .8rem}
mark.flag{border-radius:3px;padding:0 1px;cursor:help}
mark.flag.hallucinated{background:#ffcdd2;color:inherit;border-bottom:2px solid #c62828}
mark.flag.unverified{background:#fff3c4;color:inherit;border-bottom:2px dashed #8d6e00}
ul.findings li{margin:.4rem 0}blockquote{margin:.2rem 0 .2rem 1rem;color:#444;font-style:italic}
del{background:#ffd7d5;text-decoration:line-through}ins{background:#ccf5d0;text-decoration:none}
.muted{color:#666;font-size:.9rem}details{margin:.5rem 0}
""" + _COVERAGE_CSS
_CSP = "default-src 'none'; style-src 'unsafe-inline'"


def _result_kind(value: Any) -> str:
    """Tell the result types apart as the report does: judge mode's result has ``judge``."""
    return "judge" if isinstance(value, dict) and "judge" in value else "check"


AnyResult = Annotated[
    Annotated[CheckResult, Tag("check")] | Annotated[JudgeOnlyResult, Tag("judge")],
    Discriminator(_result_kind),
]


class Failure(BaseModel):
    """What a failed record says went wrong."""

    type: str
    message: str


class BatchRecord(BaseModel):
    """One line of ``conli batch`` output, as the report reads it; validated strictly."""

    id: str | int
    mode: str | None = None
    source: Any = None  # shown only if a string, like the response
    response: Any = None
    ok: bool = True
    result: AnyResult | None = None
    error: Failure | None = None

    @model_validator(mode="after")
    def _complete(self) -> BatchRecord:
        """An ok record has a result, a failed one an error; sentence offsets are sane."""
        if self.ok and self.result is None:
            raise ValueError("a record with ok true needs a result")
        if not self.ok and self.error is None:
            raise ValueError("a record with ok false needs an error")
        if isinstance(self.result, CheckResult) and not all(
            0 <= s.start <= s.end <= _MAX_OFFSET for s in self.result.sentences
        ):
            raise ValueError("sentence offsets out of range")
        return self


@dataclass(frozen=True)
class Malformed:
    """A line of the results file that is not a valid record, and why; the report skips it."""

    line: int
    reason: str


def _first_error(exc: ValidationError) -> str:
    """The first problem pydantic found, as ``where: what``, and how many more there are."""
    errors = exc.errors(include_url=False)
    where = ".".join(str(part) for part in errors[0]["loc"]) or "record"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {errors[0]['msg']}{more}"


def _parse(line: bytes, number: int) -> Record | Malformed:
    """Return the line's record if it is valid; a bare ``CheckResult`` line is wrapped."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return Malformed(number, f"not valid JSON: {exc}")
    if not isinstance(data, dict):
        return Malformed(number, "not a JSON object")
    if "result" not in data and "sentences" in data:  # conli check --json
        data = {"id": f"line {number}", "ok": True, "result": data}
    try:
        BatchRecord.model_validate(data, strict=True)
    except ValidationError as exc:
        return Malformed(number, _first_error(exc)[:300])
    return data


def iter_results(path: Path) -> Iterator[Record | Malformed]:
    """Yield each non-blank line's record as read, or ``Malformed`` if it is not valid."""
    with path.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                yield _parse(line, number)


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


def _scores(record: Record) -> tuple[float | None, float | None]:
    """Judge scores (before, after); judge mode gives one score, shown as both."""
    result = record.get("result", {})
    if "judge" in result:
        only = _score(result["judge"])
        return only, only
    return _score(result.get("judge_raw")), _score(result.get("judge_refined"))


def _flagged(result: Record) -> list[Record]:
    return [s for s in result.get("sentences") or []
            if s.get("verdict") in ("hallucinated", "unverified")]


def highlight(response: str, sentences: list[Record], anchor: str,
              words: list[Record] | None = None) -> str:
    """Render the response as escaped HTML, each flagged sentence in a ``<mark>`` at its offsets.

    ``words`` (from ``flagged_words``) are marked too, inside flagged sentences or between.
    """
    words = words or []
    out: list[str] = []
    cursor = 0
    for s in sorted(sentences, key=lambda s: s.get("start", 0)):
        start, end = s.get("start"), s.get("end")
        if not (isinstance(start, int) and isinstance(end, int) and cursor <= start <= end
                <= len(response)):
            continue  # offsets that do not fit this response are not trusted
        reasons = " | ".join(_text(r) for r in s.get("reasons") or [])
        verdict = "hallucinated" if s.get("verdict") == "hallucinated" else "unverified"
        out.append(marked(response, cursor, start, words))
        out.append(f'<mark class="flag {verdict}" id="{anchor}-s{int(s.get("index", 0))}" '
                   f'title="{escape(reasons)}">{marked(response, start, end, words)}</mark>')
        cursor = end
    out.append(marked(response, cursor, len(response), words))
    return "".join(out)


def word_diff(before: str, after: str) -> str:
    """Render an inline word diff as escaped HTML: removed in ``<del>``, added in ``<ins>``."""
    a, b = re.split(r"(\s+)", before), re.split(r"(\s+)", after)
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(escape("".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(f"<del>{escape(''.join(a[i1:i2]))}</del>")
        if j2 > j1:
            out.append(f"<ins>{escape(''.join(b[j1:j2]))}</ins>")
    return "".join(out)


def _findings(sentences: list[Record]) -> str:
    items = []
    for s in sentences:
        evidence = [_text(j.get("evidence")) for j in s.get("judgements") or []
                    if _text(j.get("evidence")) and j.get("verdict") != "supported"]
        quotes = "".join(f"<blockquote>“{escape(e)}”</blockquote>" for e in evidence)
        reasons = "".join(f"<li>{escape(_text(r))}</li>" for r in s.get("reasons") or [])
        items.append(f'<li><span class="badge {escape(str(s.get("verdict")))}">'
                     f'{escape(str(s.get("verdict")))}</span> “{escape(_text(s.get("text")))}”'
                     f"<ul>{reasons}</ul>{quotes}</li>")
    return f'<h3>Findings</h3><ul class="findings">{"".join(items)}</ul>' if items else ""


def render_record(record: Record, number: int) -> str:
    """One ``<section>`` for one record."""
    anchor = f"r{number}"
    verdict = _verdict(record)
    result = record.get("result") or {}
    parts = [f'<section class="rec" id="{anchor}"><h2>{escape(str(record.get("id")))} '
             f'<span class="badge {escape(verdict)}">{escape(verdict)}</span> '
             f'<span class="muted">{escape(str(record.get("mode") or ""))}</span></h2>']
    if verdict == "error":
        error = record.get("error") or {}
        parts.append(f'<p><b>{escape(_text(error.get("type")))}</b>: '
                     f'{escape(_text(error.get("message")))}</p>')
    response = _response_of(record)
    flagged = _flagged(result)
    if response:
        words = flagged_words(result.get("word_scores"), len(response))
        parts.append(f'<div class="text response">{highlight(response, flagged, anchor, words)}'
                     "</div>")
    parts.append(_findings(flagged))
    parts.append(coverage_section(result))
    refined = result.get("refined_text")
    if isinstance(refined, str) and refined != response:
        status = escape(str((result.get("mitigation") or {}).get("status", "")))
        parts.append(f'<h3>Rewrite <span class="muted">({status})</span></h3>'
                     f'<div class="text diff">{word_diff(response, refined)}</div>')
    parts.append(additions_section(result))
    before, after = _scores(record)
    if before is not None or after is not None:
        parts.append(f'<p class="scores">Judge score: before <b>{_shown(before)}</b> → '
                     f'after <b>{_shown(after)}</b> (1-5)</p>')
    for key in ("judge", "judge_raw", "judge_refined"):
        judged = result.get(key)
        if isinstance(judged, dict) and judged.get("reasoning"):
            reasoning = escape(_text(judged["reasoning"]))
            parts.append(f'<p class="muted">{escape(key)}: {reasoning}</p>')
    source = record.get("source")
    if isinstance(source, str):
        parts.append(f'<details><summary>Source</summary><div class="text">{escape(source)}'
                     "</div></details>")
    parts.append("</section>")
    return "".join(parts)


@dataclass
class _Tally:
    """The summary's counts over the whole results file."""

    verdicts: Counter[str] = field(default_factory=Counter)
    flagged: int = 0
    rewritten: int = 0
    points: int = 0
    uncovered: int = 0
    scores: dict[str, list[float]] = field(default_factory=lambda: {"before": [], "after": []})
    malformed: list[Malformed] = field(default_factory=list)

    def add(self, record: Record | Malformed) -> None:
        """Count one line: a record's verdict, flags, rewrites and scores, or a malformed one."""
        if isinstance(record, Malformed):
            self.malformed.append(record)
            return
        self.verdicts[_verdict(record)] += 1
        result = record.get("result") or {}
        self.flagged += sum(s.get("verdict") == "hallucinated"
                            for s in result.get("sentences") or [])
        self.rewritten += len((result.get("mitigation") or {}).get("changes") or [])
        points = (result.get("coverage") or {}).get("points") or []
        self.points += len(points)
        self.uncovered += sum(p.get("verdict") == "uncovered" for p in points)
        before, after = _scores(record)
        self.scores["before"] += [before] if before else []
        self.scores["after"] += [after] if after else []


def _mean(values: list[float]) -> str:
    return f"{sum(values) / len(values):.2f} (n={len(values)})" if values else "–"


def _malformed_list(malformed: list[Malformed]) -> str:
    """The skipped lines, by number and reason (the first ``_LISTED``); empty if none."""
    if not malformed:
        return ""
    items = "".join(f"<li>line {m.line}: {escape(m.reason)}</li>" for m in malformed[:_LISTED])
    rest = f"<li>… and {len(malformed) - _LISTED} more</li>" if len(malformed) > _LISTED else ""
    return (f"<details><summary>Malformed records (skipped)</summary>"
            f"<ul>{items}{rest}</ul></details>")


def _summary(tally: _Tally) -> str:
    rows: list[tuple[str, object]] = [("records", sum(tally.verdicts.values()))]
    rows += [("malformed records (skipped)", len(tally.malformed))] if tally.malformed else []
    rows += [(f"verdict: {name}", count) for name, count in sorted(tally.verdicts.items())]
    rows += [("hallucinated sentences", tally.flagged),
             ("sentences rewritten or removed", tally.rewritten),
             ("mean judge score before", _mean(tally.scores["before"])),
             ("mean judge score after", _mean(tally.scores["after"]))]
    rows += [("points uncovered / given", f"{tally.uncovered} / {tally.points}")] \
        if tally.points else []
    body = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>" for k, v in rows)
    return f'<table class="summary">{body}</table>{_malformed_list(tally.malformed)}'


@dataclass(frozen=True)
class Written:
    """What ``write_report`` wrote: how many records it shows, and the lines it skipped."""

    records: int
    malformed: list[Malformed]


def write_report(results: Path, out: TextIO, *, title: str = "conli audit report") -> Written:
    """Write the whole HTML document to ``out``; malformed lines are skipped and counted."""
    out.write(f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
              f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
              f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"
              f"<h1>{escape(title)}</h1><p class=\"muted\">{escape(str(results.name))}</p>")
    tally = _Tally()
    for item in iter_results(results):
        tally.add(item)
    out.write(_summary(tally) + legend())
    count = 0
    for item in iter_results(results):
        if not isinstance(item, Malformed):
            count += 1
            out.write(render_record(item, count))
    out.write("</body></html>\n")
    return Written(count, tally.malformed)


# --- command line -------------------------------------------------------------------------


def add_report_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``conli report`` on the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "report", help="render batch results (JSONL) as one self-contained HTML file")
    parser.add_argument("results", type=Path, help="JSONL from conli batch (or check --json)")
    parser.add_argument("--output", "-o", type=Path, required=True, help="the HTML file to write")
    parser.add_argument("--title", default="conli audit report", help="page title")
    parser.set_defaults(handler=run_report)
    return parser


def run_report(args: argparse.Namespace) -> int:
    """Render atomically: a temp file renamed over the output."""
    if not args.results.is_file():
        raise InputError(f"cannot read results file {str(args.results)!r}")
    target: Path = args.output
    with atomic_writer(target) as handle:
        written = write_report(args.results, handle, title=args.title)
    print(f"conli report: {written.records} records -> {target}")
    if written.malformed:
        lines = ", ".join(str(m.line) for m in written.malformed[:10])
        more = ", …" if len(written.malformed) > 10 else ""
        print(f"conli report: malformed records skipped: {len(written.malformed)} "
              f"(lines {lines}{more})", file=sys.stderr)
    return 0
