"""What a CI job or a nightly run reads of a batch: JUnit XML, a JSON summary, GitHub's views.

Each reads every record of OUT (``records.out_records``, a record at a time, so one read
serves them all), held to this run's threshold as the gate is (``conli.gate``):
``JUnitSuite``, one testcase a record with its time and every flagged sentence; ``Figures``,
the counts, pass rate, mean scores,
reasons, failing ids and timings of ``--summary FILE.json``; ``step_summary`` and
``github_annotations``, what GitHub Actions shows (its job summary, ``::error`` lines) when
``GITHUB_STEP_SUMMARY`` and ``GITHUB_ACTIONS`` are set. Text from a record is data: control
characters are written as escapes, and each format's own syntax escaped.
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from conli.batch.records import Record, shown_id
from conli.batch.summary import Summary, outcome
from conli.gate import FailOn, GateTally, ranking_score, record_outcome, why_not_passed
from conli.models import FLAGGED
from conli.text.escapes import escaped
from conli.version import __version__

FORMAT = "conli-batch-summary-1"
SHOWN = 20  # ids a human-facing view lists; the JSON summary lists them all
ANNOTATED = 10  # GitHub shows ten error annotations a step
def plain(text: object) -> str:
    r"""``text`` with its control characters as visible escapes (``\x1b``), safe in any format."""
    return escaped(str(text), xml=True)


def flagged_lines(result: Mapping[str, Any], threshold: float | None) -> list[str]:
    """Every sentence that kept ``result`` from passing: flagged, or scored under the bar."""
    lines = []
    for s in result.get("sentences") or []:
        if not s.get("checked"):
            continue
        score = ranking_score(s.get("score"), s.get("score_method"))
        shown = "" if score is None else f", score {score:g}"
        low = threshold is not None and (score is None or score < threshold)
        if s.get("verdict") in FLAGGED or low:
            reasons = "; ".join(str(r) for r in s.get("reasons") or [])
            under = f" under threshold {threshold:g}" if low and s.get("verdict") not in FLAGGED \
                else ""
            lines.append(f"sentence {s.get('index')} ({s.get('verdict')}{shown}{under}) "
                         f"{str(s.get('text'))!r}" + (f": {reasons}" if reasons else ""))
    return lines


def check_seconds(record: Record) -> float | None:
    """How long a record's check took (None: it failed, or came from the result cache)."""
    result = record.get("result") or {}
    if not record.get("ok") or (result.get("usage") or {}).get("cached"):
        return None
    seconds = (result.get("timings") or {}).get("total")
    return float(seconds) if isinstance(seconds, int | float) else None


class JUnitSuite:
    """OUT as JUnit XML, a record at a time (``add``), so it shares one read of OUT.

    One testcase a record: ``failure`` did not pass, ``error`` did not run. A record that
    ran and did not pass (hallucinated, below the threshold, or unverified) is a failure
    whose message says why (``gate.why_not_passed``) and whose text lists every sentence
    that kept it from passing; one that failed to run (``ok: false``) is an error with its
    error's type and message. Each testcase has its check's seconds as its time.
    """

    def __init__(self, threshold: float | None) -> None:
        self.threshold = threshold
        self._suite = ElementTree.Element("testsuite", name="conli batch")
        self._counts = {"tests": 0, "failures": 0, "errors": 0}
        self._total = 0.0

    def add(self, record: Record) -> None:
        """One record of OUT as its testcase."""
        self._counts["tests"] += 1
        seconds = check_seconds(record) or 0.0
        self._total += seconds
        case = ElementTree.SubElement(self._suite, "testcase", classname="conli.batch",
                                      name=plain(shown_id(record)), time=f"{seconds:.3f}")
        result = record.get("result")
        if not record.get("ok") or not isinstance(result, dict):
            error = record.get("error")
            error = error if isinstance(error, dict) else {}
            self._counts["errors"] += 1
            ElementTree.SubElement(case, "error", type=plain(error.get("type", "Error")),
                                   message=plain(error.get("message", "the record failed")))
            return
        if record_outcome(result, self.threshold) in ("failed", "unverified"):
            self._counts["failures"] += 1
            failure = ElementTree.SubElement(
                case, "failure", type=plain(result.get("verdict")),
                message=plain(why_not_passed(result, self.threshold)))
            failure.text = plain("\n".join(flagged_lines(result, self.threshold)))

    def xml(self) -> str:
        """The document: the suite with its counts and total time, in ``testsuites``."""
        counts, total = self._counts, f"{self._total:.3f}"
        suite = self._suite
        suite.attrib.update({key: str(value) for key, value in counts.items()}, time=total)
        root = ElementTree.Element("testsuites", {key: str(v) for key, v in counts.items()},
                                   time=total)
        root.append(suite)
        ElementTree.indent(root)
        return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def junit_xml(records: Iterable[Record], threshold: float | None) -> str:
    """``records`` (OUT) as JUnit XML (``JUnitSuite``)."""
    suite = JUnitSuite(threshold)
    for record in records:
        suite.add(record)
    return suite.xml()


def _reason_of(sentence: Mapping[str, Any]) -> tuple[str, str, str]:
    """Why one sentence is flagged, as ``(verdict, detector, label)``: what the summary counts."""
    verdict = str(sentence.get("verdict"))
    mine = [j for j in sentence.get("judgements") or [] if j.get("verdict") == verdict]
    decided = next((j for j in mine if j.get("detector") == sentence.get("detector")),
                   mine[-1] if mine else {})
    detector = str(sentence.get("detector") or decided.get("detector") or "")
    label = "could not be checked" if verdict == "unverified" else str(decided.get("label") or "")
    return verdict, detector, label


@dataclass
class Figures:
    """What OUT holds, counted for CI: verdicts, the gate, scores, reasons, errors, timings."""

    threshold: float | None = None
    fail_on: FailOn | None = None
    mode: str = "check"  # judge mode gives scores, not verdicts: no gate, no pass rate
    records: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    gate: GateTally = field(init=False)
    why: dict[str, str] = field(default_factory=dict)  # why each failing record failed
    scores: dict[str, list[float]] = field(default_factory=lambda: {
        "support_score": [], "supported_share": [], "judge_before": [], "judge_after": []})
    reasons: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    error_ids: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    cached: int = 0

    def __post_init__(self) -> None:
        self.gate = GateTally(threshold=self.threshold)

    def add(self, record: Record) -> None:
        """Count one record of OUT."""
        self.records += 1
        key = shown_id(record)
        result = record.get("result")
        if not record.get("ok") or not isinstance(result, dict):
            self.verdicts["error"] += 1
            error = record.get("error") if isinstance(record.get("error"), dict) else {}
            kind = str((error or {}).get("type", "Error"))
            self.errors[kind] += 1
            self.error_ids.append(key)
            self.why[key] = f"{kind}: {(error or {}).get('message', 'the record failed')}"
            return
        self.verdicts[outcome(record)] += 1
        self.cached += bool((result.get("usage") or {}).get("cached"))
        self.seconds += [s for s in [check_seconds(record)] if s is not None]
        self.gate.add(result, key)
        if record_outcome(result, self.threshold) in ("failed", "unverified"):
            self.why[key] = why_not_passed(result, self.threshold)
        self._scores(result)
        self.reasons.update(_reason_of(s) for s in result.get("sentences") or []
                            if s.get("checked") and s.get("verdict") in FLAGGED)

    def _scores(self, result: Mapping[str, Any]) -> None:
        judged = result.get("judge")
        before, after = (judged, judged) if judged else (result.get("judge_raw"),
                                                         result.get("judge_refined"))
        for name, value in (("support_score", result.get("support_score")),
                            ("supported_share", result.get("supported_share")),
                            ("judge_before", (before or {}).get("score")),
                            ("judge_after", (after or {}).get("score"))):
            if isinstance(value, int | float) and not isinstance(value, bool):
                self.scores[name].append(float(value))

    @property
    def judged_only(self) -> bool:
        """Judge mode's OUT: scores, no verdicts, so no gate and no pass rate."""
        return self.mode == "judge"

    def failing(self) -> list[str]:
        """The ids that fail ``fail_on`` (without one: every id that did not pass)."""
        return self.gate.failing(self.fail_on or "unverified")

    def pass_rate(self) -> float | None:
        """Passed over the records of OUT that could pass (a failed record does not)."""
        could = len(self.gate.keys) + len(self.error_ids)
        return None if self.judged_only or not could else self.gate.counts["passed"] / could

    def as_json(self, run: Summary, *, exit_code: int,
                files: Mapping[str, str]) -> dict[str, Any]:
        """``--summary FILE.json``: OUT's figures, this run's, and the exit code it made."""
        rate = run.processed / run.seconds if run.seconds else None
        return {
            "format": FORMAT, "conli_version": __version__,
            "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            **files, "mode": self.mode, "exit_code": exit_code,
            "gate": {"threshold": self.threshold, "fail_on": self.fail_on,
                     "fails": bool(self.fail_on and self.gate.fails(self.fail_on)),
                     "counts": {k: self.gate.counts[k] for k in ("passed", "failed",
                                                                 "unverified")},
                     "unranked": self.gate.unranked},
            "records": self.records, "verdicts": dict(sorted(self.verdicts.items())),
            "pass_rate": self.pass_rate(),
            "means": {name: _mean(values) for name, values in self.scores.items()},
            "reasons": [{"verdict": v, "detector": d, "label": label, "sentences": n}
                        for (v, d, label), n in self.reasons.most_common()],
            "failing_ids": self.failing(), "errors": dict(sorted(self.errors.items())),
            "error_ids": self.error_ids,
            "timings": {"run_seconds": round(run.seconds, 3),
                        "records_per_second": None if rate is None else round(rate, 3),
                        "check_seconds": _spread(self.seconds)},
            "run": {"processed": run.processed, "skipped": run.skipped, "errors": run.errors,
                    "calls": run.calls, "failed_calls": run.failed_calls,
                    "prompt_tokens": run.prompt_tokens, "cached_tokens": run.cached_tokens,
                    "completion_tokens": run.completion_tokens, "cached_records": run.cached,
                    "interrupted": run.interrupted, "stopped": run.stopped},
            "cached_records": self.cached,
        }


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _spread(values: Sequence[float]) -> dict[str, Any]:
    """Count, total, mean, median, 95th percentile (nearest rank) and longest of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return {"records": 0}

    def rank(share: float) -> float:
        return round(ordered[max(0, math.ceil(share * len(ordered)) - 1)], 3)

    return {"records": len(ordered), "total": round(sum(ordered), 3),
            "mean": _mean(ordered), "p50": rank(0.5), "p95": rank(0.95),
            "max": round(ordered[-1], 3)}


# --- GitHub Actions ---------------------------------------------------------------------------

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")


def md(text: object) -> str:
    """Text for a GitHub Markdown table cell or line: one line, its syntax escaped."""
    return _MARKDOWN.sub(r"\\\1", " ".join(plain(text).split()))


def annotation(level: str, title: str, message: str) -> str:
    """One workflow command line (``::error title=...::message``), escaped as GitHub asks."""
    def data(text: str) -> str:
        return plain(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    prop = data(title).replace(":", "%3A").replace(",", "%2C")
    return f"::{level} title={prop}::{data(message)}"


def listed(ids: Sequence[str], why: Mapping[str, str]) -> list[str]:
    """Markdown list items of the first ``SHOWN`` ids and why each, then how many more."""
    lines = [f"- {md(key)}" + (f": {md(why[key])}" if key in why else "")
             for key in ids[:SHOWN]]
    return lines + ([f"- … and {len(ids) - SHOWN} more"] if len(ids) > SHOWN else [])


def step_summary(figures: Figures, run: Summary, *, exit_code: int) -> str:
    """The Markdown a GitHub job summary shows for this batch."""
    rows = [("records in OUT", f"{figures.records} ({len(figures.error_ids)} failed to run)"),
            ("verdicts", ", ".join(f"{k} {n}" for k, n in sorted(figures.verdicts.items())))]
    if not figures.judged_only:
        rate = figures.pass_rate()
        rows += [("gate", figures.gate.format()),
                 ("pass rate", "–" if rate is None else f"{100 * rate:.1f}%")]
    rows += [(f"mean {name.replace('_', ' ')}", f"{value:.3f}")
             for name, value in ((n, _mean(v)) for n, v in figures.scores.items())
             if value is not None]
    rows += [("reasons", "; ".join(f"{v} by {d}" + (f" ({label})" if label else "") + f": {n}"
                                   for (v, d, label), n in figures.reasons.most_common(5)))] \
        if figures.reasons else []
    rows += [("this run", f"{run.processed} records in {run.seconds:.1f}s, {run.calls} model "
                          f"calls, {run.cached} from the result cache; exit {exit_code}")]
    failing = figures.failing() if not figures.judged_only else []
    said = [f"{len(failing)} did not pass"] if failing else []
    said += [f"{len(figures.error_ids)} failed to run"] if figures.error_ids else []
    if not said and not figures.judged_only:
        said = ["every one passed"]
    lines = [f"### conli batch ({figures.mode}): {figures.records} records"
             + (f": {', '.join(said)}" if said else ""),
             "", "| | |", "|---|---|", *(f"| {md(k)} | {md(v)} |" for k, v in rows)]
    if failing:
        lines += ["", f"**Did not pass** ({len(failing)}):", *listed(failing, figures.why)]
    if figures.error_ids:
        lines += ["", f"**Failed to run** ({len(figures.error_ids)}):",
                  *listed(figures.error_ids, figures.why)]
    return "\n".join(lines) + "\n\n"


def github_annotations(figures: Figures) -> list[str]:
    """``::error`` lines for the records that failed to run or fail the gate (the first ten).

    Without ``--fail-on`` a record that did not pass is a ``::warning``: nothing fails.
    """
    level = "error" if figures.fail_on else "warning"
    items = [("error", f"conli: {key} failed to run", figures.why[key])
             for key in figures.error_ids]
    items += [(level, f"conli: {key} did not pass", figures.why.get(key, "did not pass"))
              for key in (figures.failing() if not figures.judged_only else [])]
    lines = [annotation(*item) for item in items[:ANNOTATED]]
    if len(items) > ANNOTATED:
        lines.append(annotation("notice", "conli", f"{len(items) - ANNOTATED} more records "
                                "did not pass or failed to run: see the job summary or JUnit"))
    return lines


def append_step_summary(path: Path, text: str) -> None:
    """Append to GitHub's job summary file; one that cannot be written is said, not fatal."""
    try:
        with path.open("a", encoding="utf-8") as summary:
            summary.write(text)
    except OSError as exc:
        print(f"conli: warning: cannot write GITHUB_STEP_SUMMARY {str(path)!r}: "
              f"{exc.strerror or exc}", file=sys.stderr)
