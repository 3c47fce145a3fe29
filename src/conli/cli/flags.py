"""The flags every subcommand shares, and the settings they choose.

``add_session_flags`` and ``session_settings`` (the flags over ``CONLI_*``, through the run
room's ``run.doors.settings_from``), ``--threshold``, ``--fail-on`` and ``--no-cache``: the
command line's own, so the run room knows no argparse. A flag that lists registered names
(``--judge-mode``: ``conli.judges``; ``--detector``: ``conli.detectors``, entry points
included) gets them here too, so the run room never imports a registry.
"""

from __future__ import annotations

import argparse

from conli import detectors, judges
from conli.config import Settings
from conli.gate import FAIL_ON, FAIL_ON_TESTS
from conli.run.doors import settings_from


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


def add_session_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The flags that choose a session: the backend, the detectors and their calibration."""
    parser.add_argument("--llm", help="backend spec (default: local, or CONLI_LLM)")
    parser.add_argument(
        "--detector", action="append", metavar="NAME",
        help="detector or preset to run (repeatable, run in order; default auto: fused on "
        "the embedded model, cot on a hosted one; or CONLI_DETECTORS)",
    )
    parser.add_argument(
        "--calibration", metavar="FILE",
        help="decide with a calibration fitted on your labelled data by `conli calibrate` "
        "(or CONLI_CALIBRATION)")


def add_threshold_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--threshold``: the bar a result's ``passed`` sets on its support score (``conli.gate``)."""
    parser.add_argument(
        "--threshold", type=float, metavar="P",
        help="passed also needs every checked sentence's score (P(grounded)) at or above P, "
        "0-1 (or CONLI_THRESHOLD); a result without scores does not pass, a hallucinated one "
        "never does; verdicts are unchanged")


def add_fail_on_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--fail-on``: exit 4 when a result fails the gate it names (``conli.gate``)."""
    tests = "; ".join(f"{name}: {test}" for name, test in FAIL_ON_TESTS.items())
    parser.add_argument(
        "--fail-on", choices=FAIL_ON,
        help=f"exit 4 (for CI) when {tests}. A hallucinated result never passes, at any "
        "--threshold")


def add_cache_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--no-cache``: neither read nor write the result cache (``conli.run.cache``)."""
    parser.add_argument(
        "--no-cache", action="store_true",
        help="check again even if the result cache holds this check, and keep nothing in it "
        "(or CONLI_RESULT_CACHE=false)")


def session_settings(args: argparse.Namespace, **overrides: object) -> Settings:
    """Settings for a front door: ``CONLI_*``, then its session flags, then ``overrides``."""
    return settings_from({"llm": args.llm, "detectors": args.detector,
                          "calibration": getattr(args, "calibration", None),
                          "threshold": getattr(args, "threshold", None),
                          "judge_mode": getattr(args, "judge_mode", None), **overrides})
