"""The rubric judge: a 1-5 faithfulness score, from the errors it names, as validated JSON.

The judge lists each sentence of the text the source does not support (copied, with the
source's words it disagrees with), then gives the score. Every error is tied back to the
text: one that names no sentence of it, or quotes the source with words the source does
not have, is dropped and counted, never shown as fact. Where the backend gives
log-probabilities the score is the mean of the score token's distribution over 1-5
(G-Eval): a continuous score that moves with the errors where a single token jumps.
The rubric is a Jinja template; users point ``judge_template`` at their own file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conli.agents.answers import JudgeErrorsAnswer, NamedError
from conli.agents.nli_prompts import Layout, laid_out
from conli.agents.structured import CallRecord, ask_structured
from conli.agents.windows import tokens_of, windows_for
from conli.backends.base import Backend, Capabilities, Completion
from conli.config import Settings
from conli.errors import ContextOverflowError
from conli.models import JudgeError, JudgeResult
from conli.prompts import render
from conli.prompts.spotlight import versioned
from conli.signals.lexical import sentence_spans

DEFAULT_TEMPLATE = "judge_rubric.v2"
SHARED_TEMPLATE = "judge_rubric.v3"  # the same rubric, opening as the NLI prompt does
JUDGE_PROMPT_TOKENS = 900  # the rubric, the worked example and framing around the texts
SHARED_PROMPT_TOKENS = 1700  # the NLI prompt's rules and examples, then the rubric
ANSWER_TOKENS = 640  # four capped errors at 3 characters a token, and the score
SCORE_TOKENS = ("1", "2", "3", "4", "5")
TOP_ALTERNATIVES = 10
MIN_SCORE_MASS = 0.5  # less on the five digits: the model meant something else there
# Each error's strings are capped by the grammar, so a small model that repeats itself
# cannot run the answer past ANSWER_TOKENS and lose the score.
ERROR_CHARS = {"sentence": 200, "problem": 100, "source": 100}
MAX_ERRORS = 4  # four errors already make a short text a 1 or a 2
_SCORE_KEY = re.compile(r'"score"\s*:\s*$')
_WORD = re.compile(r"\w+")
NO_LOGPROBS = "the backend gives no log-probabilities: the score is the generated token"


def judge(
    backend: Backend, source: str, text: str, settings: Settings
) -> tuple[JudgeResult, list[CallRecord]]:
    """Score ``text`` against ``source``; ``unverified`` when no valid score came back.

    A source too long for the context is judged window by window and the best-supported
    window's score is kept (seed 003); if any window could not be scored, the result is
    ``unverified``, since that window might have scored higher.
    """
    layout = rubric_layout(settings, backend.capabilities)
    framing = SHARED_PROMPT_TOKENS if layout.shared else JUDGE_PROMPT_TOKENS
    reserved = framing + ANSWER_TOKENS + tokens_of(backend, text)
    try:
        windows = windows_for(backend, source, reserved, settings.language)
    except ContextOverflowError as exc:
        return JudgeResult(status="unverified", error=str(exc), template=layout.version), []
    if len(windows) == 1:
        return _judge_once(backend, source, text, settings, layout)
    judged = [_judge_once(backend, window, text, settings, layout) for window in windows]
    calls = [call for _, window_calls in judged for call in window_calls]
    failed = [(i, r) for i, (r, _) in enumerate(judged) if r.status != "scored"]
    if failed:
        i, result = failed[0]
        error = f"source window {i + 1} of {len(windows)} was not scored: {result.error}"
        return result.model_copy(update={"error": error}), calls
    number, best = max(enumerate(r for r, _ in judged), key=lambda item: item[1].score or 0)
    note = f"best of {len(windows)} source windows: window {number + 1}"
    return best.model_copy(update={"note": "; ".join(n for n in (best.note, note) if n)}), calls


def template_name(settings: Settings, capabilities: Capabilities) -> str:
    """The rubric template version ``settings`` use on a backend of ``capabilities``."""
    return rubric_layout(settings, capabilities).version


def rubric_layout(settings: Settings, capabilities: Capabilities) -> Layout:
    """The user's rubric file as it is, else the shipped one in ``prompt_layout``."""
    if settings.judge_template:
        name = str(settings.judge_template)  # recorded as ``render`` names it
        version = Path(name).stem if name.endswith(".jinja") else name
        return Layout(name, {}, versioned(version, settings.spotlight), settings.spotlight)
    return laid_out(DEFAULT_TEMPLATE, SHARED_TEMPLATE, settings, capabilities)


def _judge_once(
    backend: Backend, source: str, text: str, settings: Settings, layout: Layout
) -> tuple[JudgeResult, list[CallRecord]]:
    prompt = render(layout.template, source=source, text=text, spotlight=layout.spotlight,
                    **layout.variables)
    template = layout.version
    reads = backend.capabilities.logprobs > 0
    try:
        asked = ask_structured(
            backend, prompt.messages, JudgeErrorsAnswer, schema=answer_schema(), step="judge",
            template=template, max_tokens=ANSWER_TOKENS,
            max_reasks=settings.max_reasks, temperature=settings.temperature,
            top_logprobs=TOP_ALTERNATIVES if reads else 0,
        )
    except ContextOverflowError as exc:
        return JudgeResult(status="unverified", error=str(exc), template=template), []
    if asked.value is None:
        return JudgeResult(
            status="unverified", error=asked.error, template=template
        ), asked.calls
    errors, dropped = tie_errors(asked.value.errors, text, source)
    distribution = score_distribution(asked.completion) if asked.completion else None
    if distribution is not None:
        score = sum(int(k) * p for k, p in distribution.items())
        scored_by, note = "distribution", None
    else:
        score, scored_by = float(asked.value.score), "token"
        note = NO_LOGPROBS if not reads else "the score token's distribution was unreadable"
    result = JudgeResult(
        status="scored", score=score, scored_by=scored_by, distribution=distribution,
        note=note, reasoning=describe(errors, dropped), errors=errors, dropped_errors=dropped,
        template=template,
    )
    return result, asked.calls


def answer_schema() -> dict[str, Any]:
    """The answer's schema with each string and the error list capped (see ``ERROR_CHARS``)."""
    schema = JudgeErrorsAnswer.model_json_schema()
    schema["properties"]["errors"]["maxItems"] = MAX_ERRORS
    item = schema["$defs"]["NamedError"]["properties"]
    for field, limit in ERROR_CHARS.items():
        item[field]["maxLength"] = limit
    return schema


def score_distribution(completion: Completion) -> dict[str, float] | None:
    """P(1..5) at the generated score token, from its alternatives (None if unreadable)."""
    text, found = "", None
    for generated in completion.logprobs:
        if generated.token.strip() in SCORE_TOKENS and _SCORE_KEY.search(text):
            found = generated  # the last "score" key: a string inside an error may say score
        text += generated.token
    if found is None:
        return None
    mass = dict.fromkeys(SCORE_TOKENS, 0.0)
    for token, logprob in found.top.items():
        if token.strip() in mass:
            mass[token.strip()] += math.exp(logprob)
    total = sum(mass.values())
    if total < MIN_SCORE_MASS:
        return None
    return {k: v / total for k, v in mass.items()}


def locate(quote: str, text: str) -> tuple[int, int] | None:
    """Where ``quote``'s words occur in ``text``, in order; None if they do not.

    Spacing, case and punctuation between the words may differ.
    """
    words = _WORD.findall(quote)
    if not words:
        return None
    pattern = r"(?<!\w)" + r"\W+".join(re.escape(w) for w in words) + r"(?!\w)"
    found = re.search(pattern, text, re.IGNORECASE)
    return (found.start(), found.end()) if found else None


def tie_errors(named: list[NamedError], text: str, source: str) -> tuple[list[JudgeError], int]:
    """The named errors tied to a sentence of ``text``, and how many were dropped.

    An error is kept when its sentence's words occur in ``text`` (it gets that sentence's
    offsets) and its source quote, if any, occurs in ``source``.
    """
    kept: list[JudgeError] = []
    for error in named:
        span = sentence_span(error.sentence, text)
        quote = error.source.strip()
        if span is None or (quote and locate(quote, source) is None):
            continue
        start, end = span
        kept.append(JudgeError(sentence=text[start:end], start=start, end=end,
                               problem=error.problem.strip(), source_quote=quote))
    return kept, len(named) - len(kept)


def sentence_span(sentence: str, text: str) -> tuple[int, int] | None:
    """The offsets in ``text`` of the sentence ``sentence`` names (copied, or nearly)."""
    exact = text.find(sentence.strip())
    if sentence.strip() and exact >= 0:
        return exact, exact + len(sentence.strip())
    span = locate(sentence, text)
    return None if span is None else _sentence_around(text, *span)


def _sentence_around(text: str, start: int, end: int) -> tuple[int, int]:
    """The span widened to the sentence it starts in (as the lexical signals split them)."""
    for first, last in sentence_spans(text):
        if first <= start < last:
            return first, max(last, end)
    return start, end


def set_aside_verified(result: JudgeResult, text: str, verified: Sequence[str]) -> JudgeResult:
    """``result`` without the errors it names on sentences detection found supported.

    In a check every sentence of the judged text has a detector's verdict: an error the
    judge names on a sentence detection verified is not shown as fact but counted in
    ``dropped_errors``, and ``note`` says so. A score below 5 that no shown error explains
    is said to be the judge's overall impression.
    """
    spans = [(at, at + len(v)) for v in verified if v and (at := text.find(v)) >= 0]
    kept = [e for e in result.errors
            if not any(first <= e.start and e.end <= last for first, last in spans)]
    moved = len(result.errors) - len(kept)
    notes = [result.note] if result.note else []
    if moved:
        notes.append(f"{moved} error(s) the judge named are on sentences detection verified "
                     "as supported and are not shown")
    if not kept and result.score is not None and result.score < 4.95:
        notes.append("no error it named stands: the score below 5 is the judge's overall "
                     "impression, tied to no sentence")
    # the reasoning counts only the untied errors it speaks of; the note says why these went
    reasoning = describe(kept, result.dropped_errors) if result.status == "scored" \
        else result.reasoning
    return result.model_copy(update={
        "errors": kept, "dropped_errors": result.dropped_errors + moved,
        "note": "; ".join(notes) or None, "reasoning": reasoning})


def describe(errors: list[JudgeError], dropped: int) -> str:
    """The reasoning shown: the tied errors, and how many could not be tied."""
    if not errors:
        lines = ["No statement of the text was found unsupported by the source."]
    else:
        lines = [f'"{e.sentence}": {e.problem}'
                 + (f' (the source says: "{e.source_quote}")' if e.source_quote else "")
                 for e in errors]
    if dropped:
        lines.append(f"{dropped} other error(s) the judge named could not be found in the "
                     "text or the source and are not shown.")
    return " ".join(lines)
