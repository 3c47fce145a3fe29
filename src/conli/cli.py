"""Command line: a thin layer over ``conli.Checker``.

    conli check --source FILE --response FILE [--json] [--output FILE] [--llm SPEC]
    conli batch IN.jsonl OUT.jsonl [--mode check|rewrite|judge]   (conli.batch)
    conli serve [--host H] [--port P] [--open]                      (conli.service)
    conli report RESULTS.jsonl -o report.html                       (conli.report)

Exit codes: 0 checked (whatever the verdict), 2 bad input or settings, 3 backend failure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conli.batch import add_batch_parser
from conli.config import Settings
from conli.errors import BackendError, ConliError, InputError, ModelStoreError
from conli.eval_cli import add_eval_parser
from conli.evaluation.speed import add_bench_parser
from conli.files import write_atomically
from conli.inputs import decode_text, validate_text
from conli.models import CheckResult
from conli.pipeline import Checker
from conli.report import add_report_parser
from conli.service import add_serve_parser

_MARK = {"supported": "ok ", "hallucinated": "BAD", "unverified": "?? ", None: " - "}


def _read(path: str, name: str) -> str:
    """Read a file (``-`` is stdin) as strict UTF-8."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {name} file {path!r}: {exc.strerror}") from exc
    return decode_text(data, name=name)


def format_text(result: CheckResult) -> str:
    """Human-readable report: one line per sentence, reasons, the rewrite and the scores."""
    lines = [f"verdict: {result.verdict}", ""]
    for s in result.sentences:
        lines.append(f"[{_MARK[s.verdict]}] {s.text}")
        lines += [f"        - {reason}" for reason in s.reasons]
    lines += ["", f"rewrite ({result.mitigation.status}):"]
    if result.mitigation.error:
        lines.append(f"  note: {result.mitigation.error}")
    lines.append(result.refined_text)
    for label, judged in (("raw", result.judge_raw), ("refined", result.judge_refined)):
        if judged is not None:
            score = judged.score if judged.status == "scored" else f"unverified ({judged.error})"
            lines += ["", f"judge score, {label}: {score}", f"  {judged.reasoning}"]
    usage = result.usage
    lines += [
        "",
        f"{usage.calls} model calls, {usage.prompt_tokens} prompt tokens "
        f"({usage.cached_tokens} cached), {usage.completion_tokens} generated, "
        f"{result.timings['total']:.1f}s",
    ]
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="conli", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="check one response against its source")
    check.add_argument("--source", required=True, help="source file, or - for stdin")
    check.add_argument("--response", required=True, help="response file, or - for stdin")
    check.add_argument("--json", action="store_true", help="print the result object as JSON")
    check.add_argument("--output", "-o", type=Path, help="write the report here instead of stdout")
    check.add_argument("--llm", help="backend spec (default: local, or CONLI_LLM)")
    check.add_argument("--no-entity-level", action="store_true", help="sentence-level NLI only")
    check.add_argument("--no-mitigate", action="store_true", help="detect only, do not rewrite")
    check.add_argument("--no-judge", action="store_true", help="skip the 1-5 rubric judge")
    add_batch_parser(commands)
    add_serve_parser(commands)
    add_report_parser(commands)
    add_eval_parser(commands)
    add_bench_parser(commands)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, object] = {}
    if args.llm:
        overrides["llm"] = args.llm
    if args.no_entity_level:
        overrides["entity_level"] = False
    if args.no_mitigate:
        overrides["mitigate"] = False
    if args.no_judge:
        overrides["judge"] = False
    return Settings(**overrides)  # type: ignore[arg-type]


def run_check(args: argparse.Namespace) -> int:
    """Validate both inputs before loading any model, then check and report."""
    if args.source == "-" and args.response == "-":
        raise InputError("only one of --source and --response can read stdin")
    settings = _settings(args)
    source = validate_text(
        _read(args.source, "source"), name="source", max_chars=settings.max_source_chars
    )
    response = validate_text(
        _read(args.response, "response"), name="response", max_chars=settings.max_response_chars
    )
    checker = Checker(settings)
    try:
        result = checker.check(source, response)
    finally:
        checker.close()
    report = result.model_dump_json(indent=2) + "\n" if args.json else format_text(result)
    if args.output:
        write_atomically(args.output, report)
    else:
        sys.stdout.write(report)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; errors print one clear line to stderr and a non-zero exit code."""
    args = _parser().parse_args(argv)
    try:
        return int(getattr(args, "handler", run_check)(args))
    except (InputError, ModelStoreError) as exc:
        print(f"conli: error: {exc}", file=sys.stderr)
        return 2
    except BackendError as exc:
        print(f"conli: backend error: {exc}", file=sys.stderr)
        return 3
    except ConliError as exc:
        print(f"conli: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
