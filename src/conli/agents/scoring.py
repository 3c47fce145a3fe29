"""One-token NLI: read P(entailment) from the label token instead of generating reasons.

The prompt is the chain-of-thought prompt itself, with the answer prefilled up to the
label, so it shares the cached prefix and a follow-up chain-of-thought call for a failing
hypothesis costs no new prefill. Used only with backends that report ``scores_labels``.
"""

from __future__ import annotations

import math

from conli.agents.structured import CallRecord
from conli.backends.base import Backend, Message
from conli.config import Settings
from conli.errors import BackendError
from conli.models import Level
from conli.prompts import render
from conli.retry import call_with_retries

LABEL_PREFILL = '{"judgements": [{"id": 0, "label": "'
_LABELS = ("entailment", "contradiction", "neutral")
TOP_ALTERNATIVES = 10
# Below this share of probability on the three labels the model meant something else,
# so its first token says nothing reliable and the hypothesis gets full reasoning.
MIN_LABEL_MASS = 0.5


def entailment_probability(top: dict[str, float]) -> float | None:
    """P(entailment) among the three labels, from the first label token's alternatives."""
    mass = dict.fromkeys(_LABELS, 0.0)
    for token, logprob in top.items():
        piece = token.strip().strip('"').lower()
        if len(piece) < 2:
            continue
        for label in _LABELS:
            if label.startswith(piece):
                mass[label] += math.exp(logprob)
    total = sum(mass.values())
    if total < MIN_LABEL_MASS:
        return None
    return mass["entailment"] / total


def score_hypothesis(
    backend: Backend, source: str, hypothesis: str, level: Level, settings: Settings
) -> tuple[float | None, list[CallRecord]]:
    """P(entailment) for one hypothesis, or None when it could not be read."""
    template = f"nli_{level}.v1"
    prompt = render(template, source=source, hypotheses=[hypothesis], cot=settings.chain_of_thought)
    messages: list[Message] = [*prompt.messages, {"role": "assistant", "content": LABEL_PREFILL}]
    try:
        completion = call_with_retries(
            lambda: backend.complete(messages, max_tokens=1, top_logprobs=TOP_ALTERNATIVES)
        )
    except BackendError:
        return None, []
    calls = [CallRecord(f"score_{level}", template, completion.usage)]
    if not completion.top_logprobs:
        return None, calls
    return entailment_probability(completion.top_logprobs[0]), calls
