"""``conli report RESULTS -o report.html``: the command over ``conli.report``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from conli.errors import InputError
from conli.files import atomic_writer
from conli.report.html import lines_of, tally, write_report
from conli.report.marks import load_reviews


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``conli report`` on the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "report", help="render batch results or check --json output as one HTML file")
    parser.add_argument("results", type=Path,
                        help="conli batch output (JSONL) or conli check --json output")
    parser.add_argument("--output", "-o", type=Path, required=True, help="the HTML file to write")
    parser.add_argument("--title", default="conli audit report", help="page title")
    parser.add_argument("--marks", type=Path, action="append", metavar="FILE",
                        help="reviewers' marks downloaded from this report (repeat it for "
                             "each reviewer): shown beside each sentence and record, with "
                             "their agreement and sign-offs")
    parser.set_defaults(handler=run_report)
    return parser


def run_report(args: argparse.Namespace) -> int:
    """Render atomically (a temp file renamed over the output), once the input is known good."""
    if not args.results.is_file():
        raise InputError(f"cannot read results file {str(args.results)!r}")
    reviews = load_reviews(args.marks or [])  # a bad marks file, before the output is touched
    counts = tally(args.results, reviews)
    target: Path = args.output
    with atomic_writer(target) as handle:
        written = write_report(args.results, handle, title=args.title, counts=counts)
    print(f"conli report: {written.records} records -> {target}")
    if written.malformed:
        print(f"conli report: malformed records skipped: {len(written.malformed)} "
              f"({lines_of(written.malformed)})", file=sys.stderr)
    return 0
