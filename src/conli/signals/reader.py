"""Read a response through the embedded model: per-token signals from forward passes only.

Seed 002's SynCheck reads decoding dynamics; for a response someone else wrote, the same
numbers come from reading it as the model's own answer:

- pass A, the source, (question) and the response: the final hidden state at every
  response token (for a linear probe), and through the output matrix each token's
  log-probability and the entropy of the distribution it was drawn from;
- one yes/no question per sentence, asked after pass A, so the cached pass A serves every
  sentence and each costs only its own few tokens;
- pass B, the same response without the source: the context influence of the source is
  the change in each token's log-probability and the KL divergence between the two
  distributions.

Chat-template markup comes from the model's own template; every piece of user data is
tokenized as plain text, so a forged ``<|im_start|>`` in a source is text, never a turn.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from conli.backends.base import Message, ReadsHiddenStates
from conli.prompts import defuse, render
from conli.segment import Segment

READ_TEMPLATE = "signals_read.v1"
PROBE_TEMPLATE = "signals_probe.v1"
PROBE_TOP = 20
# private-use characters: not whitespace (render strips that), never in a template
_SENTINEL = "\ue000{}\ue001"
_SPLIT = re.compile("\ue000(\\w+)\ue001")
_ROWS = 64  # hidden-state rows multiplied by the output matrix at once (memory bound)


@dataclass
class Reading:
    """Per-token arrays over the response's tokens, and per-sentence probe answers.

    ``segment[i]`` is the index of the segment token ``i`` belongs to (a token of the gap
    before a segment belongs to that segment). ``hidden`` is the state at each token.
    """

    ids: Any
    segment: Any
    logp: Any
    entropy: Any
    logp_plain: Any
    entropy_plain: Any
    kl: Any
    hidden: Any
    probe_yes: dict[int, float | None] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    templates: tuple[str, ...] = (READ_TEMPLATE, PROBE_TEMPLATE)


def read(
    backend: ReadsHiddenStates,
    source: str,
    response: str,
    segments: list[Segment],
    *,
    question: str | None = None,
    probe: set[int] | None = None,
) -> Reading:
    """Run the passes over one response; ``probe`` names the segments to ask about."""
    import numpy as np

    seconds: dict[str, float] = {}
    data = {"source": defuse(source), "question": defuse(question) if question else None}
    prefix_a = _assemble(backend, READ_TEMPLATE, data)
    prefix_b = _assemble(backend, READ_TEMPLATE, {**data, "source": None})
    ids, owner = _response_tokens(backend, response, segments)
    if not ids:
        raise ValueError("the response has no tokens")

    started = time.perf_counter()
    states_a = backend.hidden_states(prefix_a + ids)
    seconds["read"] = time.perf_counter() - started

    started = time.perf_counter()
    asked = _probe(backend, data, prefix_a + ids, segments, probe)
    seconds["probe"] = time.perf_counter() - started

    started = time.perf_counter()
    states_b = backend.hidden_states(prefix_b + ids)
    seconds["read_plain"] = time.perf_counter() - started

    started = time.perf_counter()
    stats = _token_stats(
        backend.output_matrix(),
        states_a[len(prefix_a) - 1 : len(prefix_a) - 1 + len(ids)],
        states_b[len(prefix_b) - 1 : len(prefix_b) - 1 + len(ids)],
        np.asarray(ids),
    )
    seconds["stats"] = time.perf_counter() - started
    return Reading(
        ids=np.asarray(ids, dtype=np.int32),
        segment=np.asarray(owner, dtype=np.int32),
        hidden=states_a[len(prefix_a) :].astype(np.float16),
        probe_yes=asked,
        seconds=seconds,
        tokens={"read": len(prefix_a) + len(ids), "read_plain": len(prefix_b) + len(ids)},
        **stats,
    )


def _messages(name: str, data: dict[str, str | None], **extra: str) -> list[Message]:
    """The template's messages with a sentinel in place of every piece of data."""
    variables: dict[str, Any] = {
        k: (None if v is None else _SENTINEL.format(k)) for k, v in data.items()
    }
    variables.update({k: _SENTINEL.format(k) for k in extra})
    variables.setdefault("response", _SENTINEL.format("response"))
    return render(name, **variables).messages


def _tokens_of(
    backend: ReadsHiddenStates, text: str, data: dict[str, str | None]
) -> list[int]:
    """Template text as markup, the data between its sentinels as plain text."""
    ids: list[int] = []
    for number, part in enumerate(_SPLIT.split(text)):
        if number % 2 == 0:
            ids += backend.tokenize(part, special=True) if part else []
        else:
            value = data.get(part)
            if value is None:
                raise ValueError(f"the template asked for missing data {part!r}")
            ids += backend.tokenize(value)
    return ids


def _assemble(
    backend: ReadsHiddenStates, name: str, data: dict[str, str | None]
) -> list[int]:
    """Token ids of the template up to where the response starts."""
    text = backend.apply_template(_messages(name, data), generation_prompt=False)
    head, marker, _ = text.partition(_SENTINEL.format("response"))
    if not marker:
        raise ValueError(f"{name}: the chat template dropped the response")
    return _tokens_of(backend, head, data)


def _response_tokens(
    backend: ReadsHiddenStates, response: str, segments: list[Segment]
) -> tuple[list[int], list[int]]:
    """The response's tokens, tokenized segment by segment (each with its leading gap)."""
    ids: list[int] = []
    owner: list[int] = []
    cursor = 0
    for segment in segments:
        piece = backend.tokenize(response[cursor : segment.end])
        ids += piece
        owner += [segment.index] * len(piece)
        cursor = segment.end
    return ids, owner


def _probe(
    backend: ReadsHiddenStates,
    data: dict[str, str | None],
    read_ids: list[int],
    segments: list[Segment],
    wanted: set[int] | None,
) -> dict[int, float | None]:
    """P(yes) of the yes/no question about each wanted segment (None if unreadable)."""
    chosen = [s for s in segments if s.checked and (wanted is None or s.index in wanted)]
    if not chosen:
        return {}
    messages = _messages(PROBE_TEMPLATE, data, sentence="")
    text = backend.apply_template(messages, generation_prompt=True)
    _, marker, tail = text.partition(_SENTINEL.format("response"))
    if not marker:
        raise ValueError(f"{PROBE_TEMPLATE}: the chat template dropped the response")
    answers: dict[int, float | None] = {}
    for segment in chosen:
        suffix = _tokens_of(backend, tail, {**data, "sentence": defuse(segment.text)})
        top = backend.next_token_logprobs(read_ids + suffix, PROBE_TOP)
        answers[segment.index] = yes_probability(top)
    return answers


def yes_probability(top: dict[str, float]) -> float | None:
    """P(yes) among yes and no, from the first answer token's alternatives; None if neither."""
    import math

    mass = {"yes": 0.0, "no": 0.0}
    for token, logprob in top.items():
        word = token.strip().lower()
        if word in mass:
            mass[word] += math.exp(logprob)
    total = mass["yes"] + mass["no"]
    return mass["yes"] / total if total >= 0.5 else None


def _token_stats(matrix: Any, rows_a: Any, rows_b: Any, ids: Any) -> dict[str, Any]:
    """Log-prob of each actual token, entropies and KL(with source || without), by rows."""
    import numpy as np

    out: dict[str, list[Any]] = {k: [] for k in
                                 ("logp", "entropy", "logp_plain", "entropy_plain", "kl")}
    for start in range(0, len(ids), _ROWS):
        stop = start + _ROWS
        la = _log_softmax(rows_a[start:stop] @ matrix.T)
        lb = _log_softmax(rows_b[start:stop] @ matrix.T)
        pa, pb = np.exp(la), np.exp(lb)
        picked = ids[start:stop]
        rows = np.arange(len(picked))
        out["logp"].append(la[rows, picked])
        out["logp_plain"].append(lb[rows, picked])
        out["entropy"].append(-(pa * la).sum(axis=1))
        out["entropy_plain"].append(-(pb * lb).sum(axis=1))
        out["kl"].append((pa * (la - lb)).sum(axis=1))
    return {k: np.concatenate(v).astype(np.float32) for k, v in out.items()}


def _log_softmax(logits: Any) -> Any:
    import numpy as np

    top = logits.max(axis=1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
