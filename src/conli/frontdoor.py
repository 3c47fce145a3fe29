"""What the batch runner and the service share: modes, a call throttle, judge-only runs.

Each front door (batch, service, hook) offers the same three modes on the same graph:
``check`` detects only, ``rewrite`` detects and rewrites, ``judge`` scores 1-5 only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from conli.agents.judge import judge
from conli.agents.structured import usage_of
from conli.backends.base import Backend
from conli.config import Settings
from conli.inputs import validate_text
from conli.models import JudgeResult, UsageTotals

Mode = Literal["check", "rewrite", "judge"]
MODES: tuple[Mode, ...] = ("check", "rewrite", "judge")


class JudgeOnlyResult(BaseModel):
    """The result of ``judge`` mode: one rubric score of the response, and what it cost."""

    judge: JudgeResult
    usage: UsageTotals


def mode_settings(base: Settings, mode: Mode, *, with_judge: bool = False) -> Settings:
    """Return the settings for one mode: ``check`` = detect only, ``rewrite`` = detect + rewrite.

    ``with_judge`` adds the rubric judge (before/after scores) to either.
    """
    if mode == "judge":
        return base
    return base.model_copy(update={"mitigate": mode == "rewrite", "judge": with_judge})


def judge_only(backend: Backend, source: str, response: str, settings: Settings) -> JudgeOnlyResult:
    """Validate both texts like a check does, then score the response with the rubric."""
    validate_text(source, name="source", max_chars=settings.max_source_chars)
    validate_text(response, name="response", max_chars=settings.max_response_chars)
    result, calls = judge(backend, source, response, settings)
    return JudgeOnlyResult(judge=result, usage=usage_of(calls))

