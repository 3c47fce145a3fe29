"""Command line: a thin layer over ``conli.Checker``.

    conli check --source FILE --response FILE [--json] [--output FILE] [--llm SPEC]
                [--threshold P] [--fail-on hallucinated|unverified]
    conli batch IN.jsonl OUT.jsonl [--mode check|rewrite|judge]   (conli.batch)
    conli serve [--host H] [--port P] [--open]                      (conli.service)
    conli report RESULTS.jsonl -o report.html                       (conli.report)
    conli calibrate --file LABELLED.jsonl [--out calibration.json]   (conli.calibrate_cli)

Exit codes: 0 checked (whatever the verdict), 2 bad input or settings, 3 the backend could not
be used (or the check ran past its deadline), 130 interrupted; with ``--fail-on``, 4 when the
result fails that gate (``conli.gate``).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conli.batch import add_batch_parser
from conli.calibrate_cli import add_calibrate_parser
from conli.config import Settings
from conli.display import addition_lines, coverage_lines, printable, sentence_words
from conli.errors import EXIT_GATE_FAILED, EXIT_INTERRUPTED, ConliError, InputError, boundary
from conli.eval_cli import add_eval_parser
from conli.evaluation.speed import add_bench_parser
from conli.files import ensure_writable, write_atomically
from conli.frontdoor import add_session_flags, add_threshold_flag, session_settings
from conli.gate import FAIL_ON, fails
from conli.generate_cli import add_generate_parser
from conli.inputs import check_input, read_input, read_points
from conli.models import CheckResult
from conli.pipeline import Checker
from conli.report import add_report_parser
from conli.version import __version__

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
    lines += ["", f"rewrite ({result.mitigation.status}):"]
    if result.mitigation.error:
        lines.append(f"  note: {printable(result.mitigation.error)}")
    lines.append(printable(result.refined_text))
    lines += addition_lines(result.mitigation.added)
    for label, judged in (("raw", result.judge_raw), ("refined", result.judge_refined)):
        if judged is not None:
            score = (f"{judged.score:.1f}" if judged.score is not None
                     else f"unverified ({judged.error})")
            lines += ["", f"judge score, {label}: {printable(score)}",
                      f"  {printable(judged.reasoning)}"]
            lines += [f"  note: {printable(judged.note)}"] if judged.note else []
    usage = result.usage
    lines += [
        "",
        f"{usage.calls} model calls, {usage.prompt_tokens} prompt tokens "
        f"({usage.cached_tokens} cached), {usage.completion_tokens} generated, "
        f"{result.timings['total']:.1f}s",
    ]
    return "\n".join(lines) + "\n"


def _passed_line(result: CheckResult) -> list[str]:
    """Under a threshold, whether the result passed it (without one, the verdict says it)."""
    if result.threshold is None:
        return []
    score = "none" if result.support_score is None else f"{result.support_score:.2f}"
    return [f"passed: {'yes' if result.passed else 'no'} (threshold {result.threshold:.2f}, "
            f"support score {score})"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="conli", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"conli {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="check one response against its source")
    check.add_argument("--source", required=True, help="source file, or - for stdin")
    check.add_argument("--response", required=True, help="response file, or - for stdin")
    check.add_argument("--question", help="the question the response answers (text)")
    check.add_argument("--points", help="JSON file of the points the response must cover: a "
                       "list of strings or {perspective: [points]} (seed 001)")
    check.add_argument("--fix-coverage", action="store_true",
                       help="add one checked sentence for each uncovered point")
    check.add_argument("--word-scores", choices=["off", "lexical", "semantic"],
                       help="score the response's content words (default lexical)")
    check.add_argument("--json", action="store_true", help="print the result object as JSON")
    check.add_argument("--output", "-o", type=Path, help="write the report here instead of stdout")
    add_session_flags(check)
    add_threshold_flag(check)
    check.add_argument(
        "--fail-on", choices=FAIL_ON,
        help="exit 4 when the check completed and the result did not pass (without "
        "--threshold: is hallucinated); unverified: also when it could not complete (for CI)")
    check.add_argument("--no-entity-level", action="store_true", help="sentence-level NLI only")
    check.add_argument("--no-mitigate", action="store_true", help="detect only, do not rewrite")
    check.add_argument("--no-judge", action="store_true", help="skip the 1-5 rubric judge")
    check.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    add_batch_parser(commands)
    _add_serve_parser(commands)
    add_report_parser(commands)
    add_eval_parser(commands)
    add_bench_parser(commands)
    add_generate_parser(commands)
    add_calibrate_parser(commands)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    return session_settings(
        args,
        entity_level=False if args.no_entity_level else None,
        mitigate=False if args.no_mitigate else None,
        judge=False if args.no_judge else None,
        fix_coverage=True if args.fix_coverage else None,
        word_scores=args.word_scores,
    )


def _add_serve_parser(subparsers: Any) -> None:
    """``conli serve``; the service module (and FastAPI) is imported only when it runs."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve", help="serve /v1/check, /v1/rewrite, /v1/judge over HTTP")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--log-format", choices=["text", "json"], default="text",
                        help="log lines as text or as JSON objects (each with its request_id)")
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"],
                        default="info", help="the lowest level logged (default info)")
    add_session_flags(parser)
    parser.add_argument("--open", action="store_true",
                        help="serve without API keys; only allowed on a loopback host")
    parser.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from conli.service import run_serve

    return run_serve(args)


def run_check(args: argparse.Namespace) -> int:
    """Validate the inputs and the output path before loading any model, then check."""
    if args.source == "-" and args.response == "-":
        raise InputError("only one of --source and --response can read stdin")
    settings = _settings(args)
    if args.output:
        ensure_writable(args.output)
    checked = check_input(
        read_input(args.source, "source"),
        read_input(args.response, "response"),
        question=args.question,
        points=None if args.points is None else read_points(read_input(args.points, "points")),
        max_source_chars=settings.max_source_chars,
        max_response_chars=settings.max_response_chars,
    )
    show = not args.quiet and sys.stderr.isatty() and not (args.json and not sys.stdout.isatty())
    progress = _Progress() if show else None
    checker = Checker(settings)
    try:
        result = checker.run(checked, progress=progress)
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
        bar = "" if result.threshold is None else f", threshold {result.threshold:g} not passed"
        print(f"conli: --fail-on {args.fail_on}: verdict {result.verdict}{bar}", file=sys.stderr)
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


def _run_in_thread(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run ``handler`` in a daemon thread so Ctrl-C ends the process at once.

    A model call in flight cannot be interrupted from Python; the main thread stays free to
    answer the signal and leave without waiting for it.
    """
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["code"] = handler(args)
        except BaseException as exc:  # handed to the main thread as is
            outcome["error"] = exc

    thread = threading.Thread(target=work, name="conli-main", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.2)
    if "error" in outcome:
        raise outcome["error"]
    return int(outcome["code"])


def main(argv: list[str] | None = None) -> int:
    """Entry point; errors print one clear line to stderr and the exit code of ``errors``."""
    args = _parser().parse_args(argv)
    handler = getattr(args, "handler", run_check)
    try:
        if handler is run_check:
            return _run_in_thread(handler, args)
        return int(handler(args))
    except KeyboardInterrupt:
        print("\nconli: interrupted", file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(EXIT_INTERRUPTED)  # a model call may be in flight: do not wait for it
    except ConliError as exc:
        answer = boundary(exc)
        kind = "backend error" if answer.exit_code == 3 else "error"
        print(f"conli: {kind}: {printable(str(exc))}", file=sys.stderr)
        return answer.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
