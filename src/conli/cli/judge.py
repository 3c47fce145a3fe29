"""``conli judge``: score one text, or several candidate texts, 1-5 against one source.

Nothing is rewritten. Each text is checked (detection) and scored in ``--judge-mode``
(default: the configured ``judge_mode``, ``grounded``); ``both`` adds the rubric judge's
score beside the grounded one and marks texts where they differ by 2 or more for review.
``--json`` prints one object naming the mode it ran, with each text's result and audit
record (``conli.models.JudgeAudit``). Exit 0 whatever the scores; 2 bad input or settings,
3 the backend could not be used.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from conli.agents.reasoning import WRITER
from conli.cli.display import printable
from conli.cli.flags import add_judge_mode_flag, add_session_flags, session_settings
from conli.config import Settings
from conli.errors import InputError
from conli.files import ensure_writable, write_atomically
from conli.models import JudgeResult
from conli.pipeline import Checker
from conli.run.doors import JudgeOnlyResult
from conli.run.inputs import read_input, read_sources
from conli.run.plan import plan_for
from conli.run.request import RunRequest


def add_parser(subparsers: Any) -> None:
    """Register ``conli judge`` on the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "judge", help="score texts 1-5 against one source, without rewriting")
    parser.add_argument("--source", required=True, action="append", metavar="FILE",
                        help="source file, or - for stdin; repeat it for several sources")
    parser.add_argument("--response", required=True, action="append", metavar="FILE",
                        help="a text to score (repeatable: several candidates, one source)")
    parser.add_argument("--question", help="the question the texts answer (text)")
    add_judge_mode_flag(parser)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--output", "-o", type=Path, help="write the report here instead")
    add_session_flags(parser)
    parser.set_defaults(handler=run_judge, in_thread=True)


def run_judge(args: argparse.Namespace) -> int:
    """Validate every text before any model call, then judge each in turn."""
    if [*args.source, *args.response].count("-") > 1:
        raise InputError("only one of --source and --response can read stdin")
    settings = session_settings(args)
    if args.output:
        ensure_writable(args.output)
    source = read_sources(args.source, max_chars=settings.max_source_chars)
    requests = [_candidate(source, path, args, settings) for path in args.response]
    plan = plan_for(settings, "judge")
    checker = Checker(plan)
    try:
        results = [checker.run_judge(one) for one in requests]
    finally:
        checker.close()
    mode = plan.settings.judge_mode
    report = (json.dumps(as_json(mode, args.response, results), indent=2) + "\n" if args.json
              else format_text(mode, args.response, results))
    if args.output:
        write_atomically(args.output, report)
    else:
        sys.stdout.write(report)
    return 0


def _candidate(source: str | list[str], path: str, args: argparse.Namespace,
               settings: Settings) -> RunRequest:
    """One ``--response`` read and validated; among several, a refusal names which one."""
    try:
        return RunRequest.of(source, read_input(path, "response",
                                                max_chars=settings.max_response_chars),
                             question=args.question, limits=settings)
    except InputError as exc:
        if len(args.response) == 1 or str(path) in str(exc):
            raise
        raise type(exc)(f"--response {path!r}: {exc}") from exc


def as_json(mode: str, names: list[str], results: list[JudgeOnlyResult]) -> dict[str, Any]:
    """The ``--json`` object: the mode that ran, and each text's judge result and usage."""
    return {"judge_mode": mode,
            "texts": [{"response": name, **result.model_dump(mode="json")}
                      for name, result in zip(names, results, strict=True)]}


def format_text(mode: str, names: list[str], results: list[JudgeOnlyResult]) -> str:
    """One block a text: score, the sentences behind it, and any mark for review."""
    lines = [f"judge mode: {mode}"]
    for name, result in zip(names, results, strict=True):
        lines += ["", f"{printable(name)}: {_score(result.judge)}"]
        lines += [f"  {printable(result.judge.reasoning)}"] if result.judge.reasoning else []
        lines += [f"  note: {printable(result.judge.note)}"] if result.judge.note else []
        second = result.judge.second_opinion
        if second is not None:
            lines.append(f"  rubric judge beside it: {_score(second)}")
        audit = result.judge.audit
        named = result.judge.reasoning_by == WRITER  # the paragraph names every flagged one
        for row in audit.sentences if audit and not named else []:
            if row.verdict in ("hallucinated", "unverified"):
                lines.append(f"  [{row.verdict}] {printable(row.text)} ({printable(row.reason)})")
        lines += [f"  REVIEW: {printable(why)}" for why in result.judge.review]
    return "\n".join(lines) + "\n"


def _score(judged: JudgeResult) -> str:
    if judged.status == "emptied":
        return "emptied (nothing left to score)"
    if judged.score is None:
        return f"unverified ({printable(judged.error or 'no score')})"
    bound = f", bounded from {judged.bounded_from:.1f}" if judged.bounded_from else ""
    return f"{judged.score:.1f} ({judged.mode}{bound})"
