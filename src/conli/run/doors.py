"""What every front door shares: its settings over ``CONLI_*``, the judge-only results.

Each front door (check, batch, service, eval, hook) builds its settings the same way
(``settings_from``: its own choices over ``CONLI_*``; the command line's flags for them
are ``cli.flags``', so the run room knows no argparse), validates its texts once
(``run.request.RunRequest``) and reports errors through one table (``errors.boundary``).
Batch, service and the proxy offer the same three modes on the same graph
(``run.plan.RunOptions.for_mode``), each through its own ``Checker`` entrance: ``check``
detects only (``run_check``), ``rewrite`` detects and rewrites (``run_rewrite``), ``judge``
scores 1-5 only (``run_judge`` answers a ``JudgeOnlyResult``).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field, ValidationError

from conli.config import Settings
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


def settings_from(overrides: Mapping[str, object]) -> Settings:
    """``CONLI_*`` settings with a front door's flags on top (``None``: flag not given).

    A bad value, from the environment or a flag, is a ``ConfigError`` naming the setting.
    """
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise invalid_setting(exc) from exc

