"""P(entailment) read from the label token's log-probabilities.

Two readings share ``entailment_probability``: ``label_scores`` reads it at each label a
chain-of-thought answer generated (free: the call is made anyway), and the one-token mode
``score_hypothesis`` prefills the answer up to the label and generates only that token.
The one-token prompt is the chain-of-thought prompt itself, so it shares the cached prefix
and a follow-up chain-of-thought call costs no new prefill. Both need a backend whose
capabilities have ``scores_labels``.
"""

from __future__ import annotations

import math

from conli.backends.base import Backend, Completion, CompletionRequest, Message
from conli.backends.calls import CallRecord, call_model
from conli.config import Settings
from conli.prompts import render

_LABELS = ("entailment", "contradiction", "neutral")
_LABEL_KEY = '"label"'
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


def label_scores(completion: Completion) -> list[float | None]:
    """P(entailment) at every ``"label"`` value the completion generated, in order."""
    scores: list[float | None] = []
    text, seen, armed = "", 0, False
    for generated in completion.logprobs:
        token = generated.token
        if armed and token.strip(' "\':'):
            scores.append(entailment_probability(generated.top))
            armed = False
        text += token
        found = text.find(_LABEL_KEY, seen)
        while found > 0 and text[found - 1] == "\\":  # an escaped quote inside a string
            found = text.find(_LABEL_KEY, found + 1)
        if found != -1:
            seen, armed = found + len(_LABEL_KEY), True
    return scores


def score_hypothesis(
    backend: Backend,
    source: str,
    hypothesis: str,
    template: str,
    opening: str,
    settings: Settings,
    *,
    question: str | None = None,
) -> tuple[float | None, list[CallRecord]]:
    """P(entailment) for one hypothesis, or None when it could not be read.

    ``opening`` is the prompt version's answer up to its label, prefilled.
    """
    prompt = render(template, source=source, hypotheses=[hypothesis],
                    cot=settings.chain_of_thought, question=question,
                    spotlight=settings.spotlight)
    messages: list[Message] = [*prompt.messages, {"role": "assistant", "content": opening}]
    request = CompletionRequest(messages, max_tokens=1, top_logprobs=TOP_ALTERNATIVES)
    completion, record = call_model(backend, request, step="score", template=prompt.template)
    calls = [record]
    if not completion.logprobs:
        return None, calls
    return entailment_probability(completion.logprobs[0].top), calls
