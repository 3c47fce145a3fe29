"""The rubric judge: a 1-5 faithfulness score with reasoning, as validated JSON.

The rubric is a Jinja template; users point ``judge_template`` at their own file.
"""

from __future__ import annotations

from conli.agents.structured import CallRecord, ask_structured
from conli.backends.base import Backend
from conli.config import Settings
from conli.errors import ContextOverflowError
from conli.models import JudgeAnswer, JudgeResult
from conli.prompts import render

DEFAULT_TEMPLATE = "judge_rubric.v1"


def judge(
    backend: Backend, source: str, text: str, settings: Settings
) -> tuple[JudgeResult, list[CallRecord]]:
    """Score ``text`` against ``source``; ``unverified`` when no valid score came back."""
    name = str(settings.judge_template) if settings.judge_template else DEFAULT_TEMPLATE
    prompt = render(name, source=source, text=text)
    try:
        asked = ask_structured(
            backend,
            prompt.messages,
            JudgeAnswer,
            step="judge",
            template=prompt.template,
            max_tokens=400,
            max_reasks=settings.max_reasks,
            temperature=settings.temperature,
        )
    except ContextOverflowError as exc:
        return JudgeResult(status="unverified", error=str(exc), template=prompt.template), []
    if asked.value is None:
        return JudgeResult(
            status="unverified", error=asked.error, template=prompt.template
        ), asked.calls
    result = JudgeResult(
        status="scored",
        score=asked.value.score,
        reasoning=asked.value.reasoning,
        template=prompt.template,
    )
    return result, asked.calls
