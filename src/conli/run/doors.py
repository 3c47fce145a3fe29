"""What every front door shares: the session's flags and settings, the judge-only results.

Each front door (check, batch, service, eval, hook) builds its settings the same way
(``add_session_flags`` and ``session_settings``: flags over ``CONLI_*``), validates its
texts once (``run.request.Request``) and reports errors through one table
(``errors.boundary``). Batch, service and hook offer the same three modes on the same
graph (``run.plan.RunOptions.for_mode``): ``check`` detects only, ``rewrite`` detects and
rewrites, ``judge`` scores 1-5 only (``Checker.run`` answers a ``JudgeOnlyResult``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from pydantic import BaseModel, Field, ValidationError

from conli.config import Settings
from conli.gate import FAIL_ON, FAIL_ON_TESTS
from conli.models import JudgeResult, UsageTotals
from conli.run.plan import MODES, Mode, invalid_setting, plan_for

__all__ = ["MODES", "JudgeOnlyResult", "JudgedText", "JudgedTexts", "Mode", "plan_for"]


class JudgeOnlyResult(BaseModel):
    """The result of ``judge`` mode: one 1-5 score of the response, and what it cost."""

    judge: JudgeResult
    usage: UsageTotals


class JudgedText(JudgeOnlyResult):
    """One of several judged texts, by its place among them."""

    index: int = Field(ge=0, description="the text's position among the responses")


class JudgedTexts(BaseModel):
    """Several candidate texts judged against one source, as ``conli judge --json`` gives them."""

    judge_mode: str
    texts: list[JudgedText]


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


def session_settings(args: argparse.Namespace, **overrides: object) -> Settings:
    """Settings for a front door: ``CONLI_*``, then its session flags, then ``overrides``."""
    return settings_from({"llm": args.llm, "detectors": args.detector,
                          "calibration": getattr(args, "calibration", None),
                          "threshold": getattr(args, "threshold", None),
                          "judge_mode": getattr(args, "judge_mode", None), **overrides})


def settings_from(overrides: Mapping[str, object]) -> Settings:
    """``CONLI_*`` settings with a front door's flags on top (``None``: flag not given).

    A bad value, from the environment or a flag, is a ``ConfigError`` naming the setting.
    """
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise invalid_setting(exc) from exc

