"""The rubric judge: a 1-5 faithfulness score with reasoning, as validated JSON.

The rubric is a Jinja template; users point ``judge_template`` at their own file.
"""

from __future__ import annotations

from typing import Any

from conli.agents.grounded_judge import check_quotes
from conli.agents.structured import CallRecord, ask_structured
from conli.backends.base import Backend
from conli.config import Settings
from conli.errors import ContextOverflowError
from conli.models import JudgeAnswer, JudgeResult
from conli.prompts import render
from conli.windows import tokens_of, windows_for

DEFAULT_TEMPLATE = "judge_rubric.v1"
JUDGE_PROMPT_TOKENS = 700  # the rubric and framing around source and text
ANSWER_TOKENS = 400
# The reasoning a grammar lets the judge write: 1,000 characters is at most ~330 tokens even
# at 3 characters a token, so the score always fits in ANSWER_TOKENS. Without it a small
# model that repeats itself runs to the token cap and the answer is lost (unverified).
# Validation keeps JudgeAnswer's own, looser limit for backends that do not enforce schemas.
REASONING_CHARS = 1000


def judge(
    backend: Backend, source: str, text: str, settings: Settings
) -> tuple[JudgeResult, list[CallRecord]]:
    """Score ``text`` against ``source``; ``unverified`` when no valid score came back.

    A source too long for the context is judged window by window and the best-supported
    window's score is kept (seed 003); if any window could not be scored, the result is
    ``unverified``, since that window might have scored higher.
    """
    name = str(settings.judge_template) if settings.judge_template else DEFAULT_TEMPLATE
    reserved = JUDGE_PROMPT_TOKENS + ANSWER_TOKENS + tokens_of(backend, text)
    try:
        windows = windows_for(backend, source, reserved)
    except ContextOverflowError as exc:
        template = render(name, source="", text="").template
        return JudgeResult(status="unverified", error=str(exc), template=template), []
    if len(windows) == 1:
        return _judge_once(backend, source, text, settings, name)
    judged = [_judge_once(backend, window, text, settings, name) for window in windows]
    calls = [call for _, window_calls in judged for call in window_calls]
    failed = [(i, r) for i, (r, _) in enumerate(judged) if r.status != "scored"]
    if failed:
        i, result = failed[0]
        error = f"source window {i + 1} of {len(windows)} was not scored: {result.error}"
        return result.model_copy(update={"error": error}), calls
    number, best = max(enumerate(r for r, _ in judged), key=lambda item: item[1].score or 0)
    note = f"[best of {len(windows)} source windows: window {number + 1}] "
    return best.model_copy(update={"reasoning": note + (best.reasoning or "")}), calls


def _judge_once(
    backend: Backend, source: str, text: str, settings: Settings, name: str
) -> tuple[JudgeResult, list[CallRecord]]:
    prompt = render(name, source=source, text=text)
    try:
        asked = ask_structured(
            backend,
            prompt.messages,
            JudgeAnswer,
            schema=answer_schema(),
            step="judge",
            template=prompt.template,
            max_tokens=ANSWER_TOKENS,
            max_reasks=settings.max_reasks,
            temperature=settings.temperature,
        )
    except ContextOverflowError as exc:
        return JudgeResult(status="unverified", error=str(exc), template=prompt.template), []
    if asked.value is None:
        return JudgeResult(
            status="unverified", error=asked.error, template=prompt.template
        ), asked.calls
    reasoning, status, error = asked.value.reasoning, "checked", None
    try:
        check_quotes(reasoning, text)
    except ValueError as exc:  # the score stands; reasoning that invents text does not
        reasoning, status, error = "", "dropped", f"reasoning dropped: {exc}"
    result = JudgeResult(
        status="scored",
        score=asked.value.score,
        reasoning=reasoning,
        reasoning_status=status,
        error=error,
        template=prompt.template,
    )
    return result, asked.calls


def answer_schema() -> dict[str, Any]:
    """JudgeAnswer's schema with the reasoning capped to fit the answer's token budget."""
    schema = JudgeAnswer.model_json_schema()
    schema["properties"]["reasoning"]["maxLength"] = REASONING_CHARS
    return schema
