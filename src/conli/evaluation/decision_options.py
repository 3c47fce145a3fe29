"""The options the benchmarks' decision scripts share (``benchmarks/experiments/``).

A decision script puts stored runs to the project's rule (``rule.decide``) with no model
call and writes a results folder (``report.publish``). ``decision_parser`` gives what every
one takes: ``--draws``, the rule's bootstrap draws, and ``--out``, the folder.
``add_fused_run`` adds what a script that re-reads fused's stored run on every dev example
takes: that run (``--predictions``), how many of each set's first examples to leave out as
fused.v1's training rows (``--skip``), and the real cot run and the exported features that
check what it derives from fused's (``--cot-run``, ``--features``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from conli.evaluation.rule import DRAWS

# fused.v1's training rows: the first 291 of a stored dev run, 37 of three sets and 36 of
# five (as ``conli eval judge-auroc --skip 37`` leaves them out): the rest is held out
FUSED_TRAINED_ON = 37


def decision_parser(description: str) -> argparse.ArgumentParser:
    """A decision script's parser: ``--draws`` and ``--out`` (required)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--draws", type=int, default=DRAWS,
                        help="the rule's bootstrap draws (default %(default)s)")
    parser.add_argument("--out", type=Path, required=True, help="the results folder")
    return parser


def add_fused_run(parser: argparse.ArgumentParser, *, features: str) -> None:
    """Fused's stored run (required), ``--skip``, ``--cot-run`` and ``--features``.

    ``features`` is the help of ``--features``: what the script reads the features for.
    """
    parser.add_argument("--predictions", type=Path, required=True,
                        help="a fused detect run's predictions.jsonl (all dev examples)")
    parser.add_argument("--skip", type=int, default=FUSED_TRAINED_ON,
                        help="fused: leave out the first SKIP examples of each set "
                        "(default %(default)s, fused.v1's training rows)")
    parser.add_argument("--cot-run", type=Path, default=None,
                        help="a real cot run's predictions.jsonl: checks the cot verdicts "
                        "derived from fused's")
    parser.add_argument("--features", type=Path, default=None, help=features)
