"""``conli bench``: the speed of the reference call pattern against ours (``evaluation.speed``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> None:
    """Add ``bench``: speed of the reference pattern against ours, on the embedded model."""
    parser = subparsers.add_parser("bench", help="speed: reference call pattern vs ours")
    parser.add_argument("--dataset", default="factcc")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/speed"))
    parser.add_argument(
        "--score-first", action="store_true", help="B reads labels from one token first"
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from conli.evaluation.speed import run_bench

    return run_bench(args)
