"""``conli diff OLD.jsonl NEW.jsonl``: what changed since the last run (``conli.batch.diff``).

Exit codes: 0 compared (whatever changed), 2 a file that cannot be read or holds no batch
record; with ``--fail-on``, 4 when a change of that kind was found, for a CI to gate on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from conli.batch.ci import ANNOTATED, SHOWN, annotation, append_step_summary, md
from conli.batch.diff import GATES, Diff, describe, diff, lines
from conli.cli.display import printable
from conli.cli.flags import add_threshold_flag
from conli.errors import EXIT_GATE_FAILED, InputError


def add_parser(subparsers: Any) -> None:
    """Register ``conli diff`` on the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "diff", help="what changed between two conli batch runs: verdict flips, new "
        "failures, score moves")
    parser.add_argument("old", type=Path, help="the earlier run's OUT (JSONL)")
    parser.add_argument("new", type=Path, help="the later run's OUT (JSONL)")
    add_threshold_flag(parser)
    parser.add_argument("--min-move", type=float, default=0.1, metavar="D",
                        help="a support score moved when it changed by at least D (default 0.1)")
    parser.add_argument("--min-judge-move", type=float, default=1.0, metavar="D",
                        help="a judge score (1-5) moved when it changed by at least D "
                             "(default 1)")
    parser.add_argument("--fail-on", action="append", choices=GATES, metavar="KIND",
                        help=f"exit 4 when a change of KIND was found ({', '.join(GATES)}; "
                             "repeatable): new-failures are ids that passed in OLD (or are "
                             "new) and do not pass in NEW")
    parser.add_argument("--json", action="store_true", help="print the diff as JSON")
    parser.add_argument("--all", action="store_true",
                        help=f"list every changed id (default: the first {SHOWN} of each kind)")
    parser.set_defaults(handler=run_diff)


def run_diff(args: argparse.Namespace) -> int:
    """Compare, print, and exit 4 when ``--fail-on`` names a change that was found."""
    if args.min_move < 0 or args.min_judge_move < 0:
        raise InputError("--min-move and --min-judge-move must be 0 or more")
    found, repeats = diff(args.old, args.new, threshold=args.threshold,
                          min_move=args.min_move, min_judge_move=args.min_judge_move)
    if args.json:
        print(json.dumps(found.as_json(), indent=2))
    else:
        for line in lines(found, limit=None if args.all else SHOWN):
            print(printable(line))
    if repeats:
        print(f"conli: warning: {repeats} repeated id(s) left out (the first of each counts)",
              file=sys.stderr)
    tripped = [gate for gate in args.fail_on or [] if found.found(gate)]
    _github(found, tripped)
    if tripped:
        print(f"conli: --fail-on {', '.join(tripped)}: found", file=sys.stderr)
        return EXIT_GATE_FAILED
    return 0


def _github(found: Diff, tripped: list[str]) -> None:
    """GitHub's job summary and ``::error`` lines, when its variables are set."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        counts = found.counts()
        text = ["### conli diff", "", "| | |", "|---|---|",
                *(f"| {md(name.replace('_', ' '))} | {n} |" for name, n in counts.items())]
        for title, kind in (("New failures", found.new_failures), ("Verdict flips", found.flips)):
            text += ["", f"**{title}** ({len(kind)}):"] if kind else []
            text += [f"- {md(c.id)}: {md(describe(c))}" for c in kind[:SHOWN]]
        append_step_summary(Path(summary), "\n".join(text) + "\n\n")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        level = "error" if "new-failures" in tripped else "warning"
        for change in found.new_failures[:ANNOTATED]:
            print(annotation(level, f"conli: {change.id} newly fails", describe(change)))
