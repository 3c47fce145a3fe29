"""The one path every model call takes: the check's deadline, retries, and a usage record.

Agents and generation ask for a completion through ``call_model`` and never call
``Backend.complete`` themselves. Before each attempt the check's deadline is read
(``run.context``); only what the error tree calls transient is retried (``retry``); the
call comes back with a ``CallRecord`` (step, template, tokens, retried attempts) that the
result sums into ``UsageTotals`` with ``usage_of``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from conli.backends.base import Backend, CallUsage, Completion, CompletionRequest, TokenLogprob
from conli.backends.retry import call_with_retries
from conli.models import UsageTotals


@dataclass(frozen=True)
class CallRecord:
    """One model call: which step, which template, what it cost, and its tokens' log-probs.

    ``logprobs`` holds each generated token with its top alternatives where the backend
    gives them (``capabilities.logprobs``), for detectors that read the model's numbers.
    """

    step: str
    template: str
    usage: CallUsage
    failed_attempts: int = 0  # attempts that failed and were retried before this one
    logprobs: tuple[TokenLogprob, ...] = ()


def call_model(backend: Backend, request: CompletionRequest, *, step: str, template: str
               ) -> tuple[Completion, CallRecord]:
    """One completion within the deadline, transient failures retried, and its record.

    Raises ``DeadlineExceededError`` when the deadline has passed before an attempt, and
    any other ``BackendError`` as the backend raised it (after the retries, if transient).
    """
    failures: list[BaseException] = []
    completion = call_with_retries(lambda: backend.complete(request), on_failure=failures.append,
                                   what=f"{backend.name} {step} call")
    record = CallRecord(step, template, completion.usage, len(failures), completion.logprobs)
    return completion, record


def usage_of(calls: Iterable[CallRecord]) -> UsageTotals:
    """Sum the tokens, calls and seconds of some model calls.

    The prefill/decode split is summed only when every call reported it: a partial sum
    would look like the whole.
    """
    calls = list(calls)
    usages = [call.usage for call in calls]
    prefill = [u.prefill_seconds for u in usages]
    decode = [u.decode_seconds for u in usages]
    return UsageTotals(
        calls=len(usages),
        prompt_tokens=sum(u.prompt_tokens for u in usages),
        cached_tokens=sum(u.cached_tokens for u in usages),
        completion_tokens=sum(u.completion_tokens for u in usages),
        seconds=sum(u.seconds for u in usages),
        failed_attempts=sum(call.failed_attempts for call in calls),
        prefill_seconds=_sum_all(prefill),
        decode_seconds=_sum_all(decode),
    )


def usage_by_step(calls: Iterable[CallRecord]) -> dict[str, UsageTotals]:
    """``usage_of`` for each step's calls, steps in name order."""
    by_step: dict[str, list[CallRecord]] = defaultdict(list)
    for call in calls:
        by_step[call.step].append(call)
    return {step: usage_of(records) for step, records in sorted(by_step.items())}


def _sum_all(values: list[float | None]) -> float | None:
    """The sum of ``values``, or None if there are none or any is missing."""
    known = [v for v in values if v is not None]
    return sum(known) if values and len(known) == len(values) else None
