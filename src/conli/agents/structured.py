"""Ask a backend for JSON, validate it into a Pydantic model, re-ask once on failure.

The outcome is either a validated value or an error string: never a guessed default.
Every call goes through ``backends.calls`` (deadline, retries of transient failures, usage);
output that still fails validation comes back as an error for the caller to mark
``unverified``. A backend that cannot be used
(``BackendError`` after retries) is not an answer: it propagates and fails the check.
Each re-ask and each answer left unverified is logged at INFO on ``conli.agents.structured``
(step, template, attempt and what was wrong in kind; never the texts or the answer).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from conli.backends.base import Backend, Completion, CompletionRequest, Message
from conli.backends.calls import CallRecord, call_model, usage_of
from conli.errors import validation_problems
from conli.prompts import render
from conli.prompts.boundary import defuse
from conli.prompts.spotlight import marked, unmarked

# CallRecord and usage_of live in backends.calls; kept importable here
__all__ = ["INVALID_ANSWER", "Asked", "CallRecord", "ask_structured", "exact_items_schema",
           "parse_json_model", "usage_of"]

T = TypeVar("T", bound=BaseModel)
log = logging.getLogger(__name__)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
# An answer longer than this many characters per token asked for cannot be the answer we
# asked for (a server that ignores max_tokens, or garbage): it is refused unparsed.
MAX_CHARS_PER_TOKEN = 16
ECHO_CHARS = 2000  # how much of an invalid answer a re-ask shows the model again
# How an answer that never validated is named in the error a step records (a judgement's,
# the judge's): ``conli batch`` reads it to tell a backend answering garbage from a check
# that was unverified for another reason.
INVALID_ANSWER = "invalid answer"


@dataclass
class Asked(Generic[T]):
    """A validated answer, or the reason there is none; plus every call it took.

    ``completion`` is the reply the value came from, for callers that read its log-probs.
    """

    value: T | None
    error: str | None
    calls: list[CallRecord] = field(default_factory=list)
    completion: Completion | None = None


def parse_json_model(text: str, model: type[T]) -> T:
    """Validate model output as ``model``, tolerating a code fence or text around the JSON."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1)
    start, end = stripped.find("{"), stripped.rfind("}")
    if start == -1 or end < start:
        raise ValueError("no JSON object in the answer")
    try:
        return model.model_validate_json(stripped[start : end + 1])
    except ValidationError as exc:
        raise ValueError(_short_validation_error(exc)) from exc


def _short_validation_error(exc: ValidationError) -> str:
    return validation_problems(exc.errors()[:5], "answer")


def ask_structured(
    backend: Backend,
    messages: list[Message],
    model: type[T],
    *,
    step: str,
    template: str,
    max_tokens: int,
    max_reasks: int,
    temperature: float = 0.0,
    check: Callable[[T], None] | None = None,
    schema: dict[str, Any] | None = None,
    top_logprobs: int = 0,
    seed: int | None = None,
    doubt: Callable[[T], str | None] | None = None,
) -> Asked[T]:
    """Call ``backend`` until its answer validates as ``model`` (and passes ``check``).

    ``doubt`` names a problem of a valid answer worth one of the re-asks; if a re-ask does
    not clear it, the last valid answer stands (the caller weighs what is left).
    A prompt whose data was marked (``prompts.spotlight``) has every mark in the answer
    read back as a space before it is validated: no quote, rewrite or reasoning carries
    one on. ``schema`` may narrow ``model``'s JSON schema for this call (say, exactly N items),
    which backends with constrained decoding enforce while generating. ``seed`` goes to
    every attempt (sampled calls: distinct seeds are distinct samples, in the cache too).
    """
    request = CompletionRequest(list(messages), max_tokens=max_tokens,
                                json_schema=schema or model.model_json_schema(),
                                temperature=temperature, top_logprobs=top_logprobs, seed=seed)
    calls: list[CallRecord] = []
    error = "no answer"
    doubted: Asked[T] | None = None
    spotlit = marked(messages)  # a mark in the answer is ours: read it as a space
    for attempt in range(max_reasks + 1):
        completion, record = call_model(backend, request, step=step, template=template)
        calls.append(record)
        checking = False
        try:
            if len(completion.text) > MAX_CHARS_PER_TOKEN * max_tokens + ECHO_CHARS:
                raise ValueError(
                    f"the answer has {len(completion.text):,} characters, far more than "
                    f"{max_tokens} tokens can hold"
                )
            value = parse_json_model(completion.text, model)
            if spotlit:
                value = model.model_validate(unmarked(value.model_dump()))
            checking = True
            if check is not None:
                check(value)
            complaint = doubt(value) if doubt is not None and attempt < max_reasks else None
            if complaint is None:
                return Asked(value, None, calls, completion)
            error, doubted = complaint, Asked(value, None, list(calls), completion)
            wrong = "was valid but doubted"
        except ValueError as exc:
            error = f"{INVALID_ANSWER}: {exc}"
            wrong = "failed the step's check" if checking else "did not validate"
            if completion.finish_reason == "length":
                error += " (the answer was cut off at the token limit)"
                wrong += " (cut off at the token limit)"
        if attempt < max_reasks:
            log.info("re-asking %s (%s): answer %d of at most %d %s", step, template,
                     attempt + 1, max_reasks + 1, wrong)
            reask = render("reask.v1", error=error).messages
            request = replace(request, messages=[
                *request.messages,
                {"role": "assistant", "content": _echo(completion.text)},
                *reask,
            ])
    if doubted is not None:  # a re-ask after a doubt failed to validate: the doubted answer
        log.info("%s (%s): the re-ask's answer %s; the doubted answer stands",
                 step, template, wrong)
        return replace(doubted, calls=calls)
    log.info("%s (%s): no valid answer in %d attempts, the last %s: unverified",
             step, template, len(calls), wrong)
    return Asked(None, error, calls)


def _echo(text: str) -> str:
    """The start of an invalid answer, to show the model what it sent (capped)."""
    if len(text) <= ECHO_CHARS:
        return defuse(text)
    return defuse(text[:ECHO_CHARS]) + f" [... {len(text) - ECHO_CHARS:,} more characters]"


def exact_items_schema(
    model: type[BaseModel], array: str, item: str, ids: list[int]
) -> dict[str, Any]:
    """``model``'s schema with ``array`` holding exactly one item per id, ids from ``ids``."""
    schema = model.model_json_schema()
    schema["properties"][array].update(minItems=len(ids), maxItems=len(ids))
    schema["$defs"][item]["properties"]["id"] = {"enum": ids}
    return schema
