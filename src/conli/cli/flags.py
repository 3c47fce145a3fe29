"""Command-line flags whose choices come from a registry above the run room (``conli.judges``).

``conli.run.doors`` holds the flags every front door shares; a flag that lists registered
names lives here, on the command line's floor, so the run room never imports a registry.
"""

from __future__ import annotations

import argparse

from conli import judges


def add_judge_mode_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--judge-mode``: which judge scores 1-5 (``conli.judges``); same at every front door."""
    parser.add_argument("--judge-mode", choices=judges.names(),
                        help="grounded: from detection's verdicts (default, or "
                        "CONLI_JUDGE_MODE); rubric: the model's rubric score, bounded by "
                        "detection; both: grounded with the rubric's beside it")
