"""``conli check``: check one response against its source, as text or JSON.

Exit codes: 0 checked (whatever the verdict), 2 bad input or settings, 3 the backend could not
be used (or the check ran past its deadline), 130 interrupted; with ``--fail-on``, 4 when the
result fails that gate (``conli.gate``).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any, get_args

from conli.agents.reasoning import WRITER
from conli.cli.display import addition_lines, coverage_lines, printable, sentence_words
from conli.cli.flags import (
    add_cache_flag,
    add_fail_on_flag,
    add_judge_mode_flag,
    add_session_flags,
    add_threshold_flag,
    session_settings,
)
from conli.config import LanguageSetting
from conli.errors import EXIT_GATE_FAILED, InputError
from conli.files import ensure_writable, write_atomically
from conli.gate import against_threshold, fails, gate_line
from conli.models import CheckResult
from conli.run.cache import ResultCache
from conli.run.inputs import MAX_POINTS_FILE_CHARS, read_input, read_points, read_sources
from conli.run.plan import Plan, make_plan, options
from conli.run.request import RunRequest

_MARK = {"supported": "ok ", "hallucinated": "BAD", "unverified": "?? ", None: " - "}


def format_text(result: CheckResult) -> str:
    """Human-readable report: one line per sentence, reasons, coverage, the rewrite, scores.

    Every text that came from the input or a model goes through ``printable``; words not in
    the source are listed under their sentence, as plain text (no colour codes).
    """
    lines = [f"verdict: {result.verdict}", *_passed_line(result), ""]
    for s in result.sentences:
        lines.append(f"[{_MARK[s.verdict]}] {printable(s.text)}")
        lines += [f"        - {printable(reason)}" for reason in s.reasons]
        lines += sentence_words(result.word_scores, s)
    lines += coverage_lines(result.coverage)
    if result.notes:  # a step skipped for the texts' language: said, not left to be guessed
        lines += ["", *(f"note: {printable(note.message)}" for note in result.notes)]
    lines += ["", f"rewrite ({result.mitigation.status}):"]
    if result.mitigation.error:
        lines.append(f"  note: {printable(result.mitigation.error)}")
    lines.append(printable(result.refined_text))
    lines += addition_lines(result.mitigation.added)
    for label, judged in (("raw", result.judge_raw), ("refined", result.judge_refined)):
        if judged is not None:
            score = (f"{judged.score:.1f}" if judged.score is not None
                     else "emptied" if judged.status == "emptied"
                     else f"unverified ({judged.error})")
            lines += ["", f"judge score, {label}: {printable(score)}"]
            lines += [f"  {printable(judged.reasoning)}"] if judged.reasoning else []
            lines += [f'  - "{printable(e.sentence)}": {printable(e.problem)}'
                      for e in judged.errors if judged.mode == "grounded"
                      and judged.reasoning_by != WRITER]  # else the paragraph names them
            lines += [f"  note: {printable(judged.note)}"] if judged.note else []
    usage = result.usage
    lines += [
        "",
        "from the result cache: 0 model calls (--no-cache checks again)" if usage.cached else
        f"{usage.calls} model calls, {usage.prompt_tokens} prompt tokens "
        f"({usage.cached_tokens} cached), {usage.completion_tokens} generated, "
        f"{result.timings['total']:.1f}s",
    ]
    return "\n".join(lines) + "\n"


def _passed_line(result: CheckResult) -> list[str]:
    """Under a threshold, whether the result passed it, and why, in words that cannot clash.

    A verdict standing in as 1.00 is no score above the bar, and the line says so.
    """
    if result.threshold is None:
        return []
    why = printable(against_threshold(result, result.threshold))
    return [f"passed: {'yes' if result.passed else 'no'} ({why})"]


def add_parser(subparsers: Any) -> None:
    """Register ``conli check`` on the CLI's subparsers."""
    check: argparse.ArgumentParser = subparsers.add_parser(
        "check", help="check one response against its source")
    check.add_argument("--source", required=True, action="append", metavar="FILE",
                       help="source file, or - for stdin; repeat it for several sources (a "
                       "RAG app's chunks): each sentence names the source its evidence is in")
    check.add_argument("--response", required=True, help="response file, or - for stdin")
    check.add_argument("--question", help="the question the response answers (text)")
    check.add_argument("--points", help="JSON file of the points the response must cover: a "
                       "list of strings or {perspective: [points]} (seed 001)")
    check.add_argument("--fix-coverage", action="store_true",
                       help="add one checked sentence for each uncovered point")
    check.add_argument("--word-scores", choices=["off", "lexical", "semantic"],
                       help="score the response's content words (default lexical)")
    check.add_argument("--language", choices=get_args(LanguageSetting), metavar="CODE",
                       help="the texts' language, an ISO 639-1 code (en, de, fr, es, ...): "
                       "it picks the sentence splitter and stop words, and the English NER "
                       "runs on en only; default auto: the source's (or CONLI_LANGUAGE)")
    check.add_argument("--json", action="store_true", help="print the result object as JSON")
    check.add_argument("--output", "-o", type=Path, help="write the report here instead of stdout")
    add_session_flags(check)
    add_judge_mode_flag(check)
    add_threshold_flag(check)
    add_fail_on_flag(check)
    add_cache_flag(check)
    check.add_argument("--no-entity-level", action="store_true", help="sentence-level NLI only")
    check.add_argument("--no-mitigate", action="store_true", help="detect only, do not rewrite")
    check.add_argument("--no-judge", action="store_true", help="skip the 1-5 judge")
    check.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    check.set_defaults(handler=run_check, in_thread=True)


def _plan(args: argparse.Namespace) -> Plan:
    """The session's settings, with this check's run choices (``RunOptions``) applied."""
    tuning = {"entity_level": False if args.no_entity_level else None,
              "word_scores": args.word_scores, "language": args.language}
    chosen = options(mitigate=False if args.no_mitigate else None,
                     judge=False if args.no_judge else None,
                     fix_coverage=True if args.fix_coverage else None,
                     tuning={name: value for name, value in tuning.items() if value is not None})
    return make_plan(session_settings(args, result_cache=False if args.no_cache else None),
                     chosen)


def run_check(args: argparse.Namespace) -> int:
    """Validate the inputs and the output path before loading any model, then check."""
    if [*args.source, args.response].count("-") > 1:
        raise InputError("only one of --source and --response can read stdin")
    plan = _plan(args)
    settings = plan.settings
    if args.output:
        ensure_writable(args.output)
    request = RunRequest.of(
        read_sources(args.source, max_chars=settings.max_source_chars),
        read_input(args.response, "response", max_chars=settings.max_response_chars),
        question=args.question,
        points=None if args.points is None else read_points(
            read_input(args.points, "points", max_chars=MAX_POINTS_FILE_CHARS)),
        limits=settings,
    )
    show = not args.quiet and sys.stderr.isatty() and not (args.json and not sys.stdout.isatty())
    progress = _Progress() if show else None
    from conli.pipeline import Checker  # the check itself: not loaded for --help

    checker = Checker(plan, result_cache=ResultCache.of(settings))
    try:
        result = checker.run(request, progress=progress)
    finally:
        if progress is not None:
            progress.done()
        checker.close()
    report = result.model_dump_json(indent=2) + "\n" if args.json else format_text(result)
    if args.output:
        write_atomically(args.output, report)
    else:
        sys.stdout.write(report)
    if args.fail_on and fails(result, args.fail_on):
        print(f"conli: {gate_line(result, args.fail_on)}", file=sys.stderr)
        return EXIT_GATE_FAILED
    return 0


class _Progress:
    """One self-overwriting stderr line: the step running and how many claims it has done."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = time.monotonic()

    def __call__(self, step: str, done: int, total: int) -> None:
        count = f" {done}/{total}" if total else ""
        with self._lock:
            sys.stderr.write(f"\r\x1b[Kconli: {step.replace('_', ' ')}{count} "
                             f"({time.monotonic() - self._started:.0f}s)")
            sys.stderr.flush()

    def done(self) -> None:
        with self._lock:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
