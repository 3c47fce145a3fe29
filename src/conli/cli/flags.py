"""Command-line flags whose choices come from a registry above the run room.

``conli.run.doors`` holds the flags every front door shares; a flag that lists registered
names (``--judge-mode``: ``conli.judges``; ``--detector``: ``conli.detectors``, entry points
included) gets them here, on the command line's floor, so the run room never imports a
registry.
"""

from __future__ import annotations

import argparse

from conli import detectors, judges


def add_judge_mode_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--judge-mode``: which judge scores 1-5 (``conli.judges``); same at every front door."""
    parser.add_argument("--judge-mode", choices=judges.names(),
                        help="grounded: from detection's verdicts (default, or "
                        "CONLI_JUDGE_MODE); rubric: the model's rubric score, bounded by "
                        "detection; both: grounded with the rubric's beside it")


def registry_help(parser: argparse.ArgumentParser) -> None:
    """Name every registered detector and preset in ``parser``'s ``--detector`` help, if any.

    Read from the registry when the help is built, so a plug-in's detector is listed too.
    """
    for action in parser._actions:
        if action.dest == "detector" and action.help is not None:
            action.help = f"{action.help}; one of: {', '.join(detectors.names())}"
