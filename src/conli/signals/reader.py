"""Read a response through the embedded model: per-token signals from forward passes only.

Seed 002's SynCheck reads decoding dynamics; for a response someone else wrote, the same
numbers come from reading it as the model's own answer:

- pass A, the source, (question) and the response: each response token's log-probability
  and the entropy of the distribution it was drawn from, and the source's hidden states;
- pass B, the same response without the source: the same numbers without the source's
  influence (their difference is seed 002's context influence), and the response's
  hidden states, each read without the source in view;
- alignment: each response token's best cosine match among the source's tokens (pass A's
  source states against pass B's response states, centred on their joint mean as
  BERTScore-like alignment needs with a decoder), the semantic support seed 001 measures.

Through the prompt cache (``CONLI_READING=cache``) the same two log-probabilities come
from the response's tokens forced one by one after ``signals_read.v2``, which opens exactly
as the check's NLI prompt does, so the source is not prefilled again; entropy and
alignment are not computed there.

Chat-template markup comes from the model's own template; every piece of user data is
tokenized as plain text, so a forged ``<|im_start|>`` in a source is text, never a turn.
A reading is kept whole by a backend that keeps readings (the evaluation's call cache).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from conli.backends.base import (
    Backend,
    ReadsHiddenStates,
    ScoresContinuations,
    keeps_readings,
    reads_hidden_states,
    scores_continuations,
)
from conli.backends.calls import CallRecord
from conli.errors import ConfigError
from conli.prompts import render
from conli.prompts.boundary import defuse
from conli.prompts.spotlight import datamark, versioned
from conli.text.segment import Segment

READ_TEMPLATE = "signals_read.v1"
CACHED_TEMPLATE = "signals_read.v2"  # the reading through the cache: opens as NLI does
READING_VERSION = "reading.v2"  # what a reading computes: part of the key it is kept under
# private-use characters: not whitespace (render strips that), never in a template
_SENTINEL = "\ue000{}\ue001"
_SPLIT = re.compile("\ue000(\\w+)\ue001")
ARRAYS = ("ids", "segment", "start", "end", "logp", "entropy", "logp_plain", "entropy_plain",
          "align")


@dataclass
class Reading:
    """Per-token arrays over the response's tokens (see ``ARRAYS``).

    ``segment[i]`` is the index of the segment token ``i`` belongs to (a token of the gap
    before a segment belongs to that segment); ``start``/``end`` are its character offsets
    in the response; ``align`` its best cosine match among the source's tokens.
    """

    arrays: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict)
    kept: bool = False  # replayed from a keeper, not computed
    template: str = READ_TEMPLATE  # the prompt it was read in, as results record it
    calls: list[CallRecord] = field(default_factory=list)  # its completions, if it made any

    def __getitem__(self, name: str) -> Any:
        return self.arrays[name]


class Opening(Protocol):
    """The prompt a reading through the cache opens with (``agents.nli_prompts.Layout``)."""

    @property
    def template(self) -> str:
        """The template to render (``signals_read.v2``)."""
        ...

    @property
    def variables(self) -> dict[str, Any]:
        """What the layout adds to the data (its NLI base, ``cot``, no hypotheses)."""
        ...

    @property
    def version(self) -> str:
        """What results record, naming the NLI base."""
        ...


def reading_key(backend: Backend, source: str, response: str, segments: list[Segment],
                question: str | None, template: str = READ_TEMPLATE) -> str:
    """Everything a reading depends on, hashed: model, template, code version and texts."""
    payload = {"version": READING_VERSION, "template": template, "backend": backend.name,
               "model": backend.model, "source": source, "question": question,
               "response": response, "segments": [[s.start, s.end] for s in segments]}
    encoded = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(encoded.encode()).hexdigest()


def read(backend: Backend, source: str, response: str, segments: list[Segment], *,
         question: str | None = None, opening: Opening | None = None,
         spotlight: bool = False) -> Reading:
    """The reading of one response, from the keeper if ``backend`` keeps readings.

    Two forward passes (hidden states, log-probabilities and entropies), or with
    ``opening`` the response's tokens scored after that prompt through the prompt cache
    (``ids``, ``segment``, ``start``, ``end``, ``logp``, ``logp_plain``: no entropy, no
    alignment). ``ConfigError`` if the backend cannot. With ``spotlight`` the source and
    question are datamarked (``prompts.spotlight``); the response is not, since its own
    tokens are what is read.
    """
    seconds: dict[str, float] = {}
    calls: list[CallRecord] = []
    template = versioned(READ_TEMPLATE, spotlight) if opening is None else opening.version
    compute: Callable[[], dict[str, Any]]
    if opening is None:
        reader = reads_hidden_states(backend)
        if reader is None:
            raise ConfigError(
                f"the signal detectors read the model's hidden states, which {backend.name} "
                "does not serve; use the embedded model (--llm local) or --detector cot")
        compute = partial(_compute, reader, source, response, segments, question, seconds,
                          spotlight)
    else:
        scorer = scores_continuations(backend)
        if scorer is None:
            raise ConfigError(
                f"CONLI_READING=cache scores the response's tokens through the prompt cache, "
                f"which {backend.name} does not serve; use the embedded model (--llm local)")
        compute = partial(_compute_cached, scorer, source, response, segments, question,
                          opening, seconds, calls, spotlight)
    keeper = keeps_readings(backend)
    if keeper is None:
        return Reading(compute(), seconds, template=template, calls=calls)
    arrays = keeper.kept_reading(
        reading_key(backend, source, response, segments, question, template), compute)
    return Reading(arrays, seconds, kept=not seconds, template=template, calls=calls)


def _compute_cached(scorer: ScoresContinuations, source: str, response: str,
                    segments: list[Segment], question: str | None, opening: Opening,
                    seconds: dict[str, float], calls: list[CallRecord],
                    spotlight: bool = False) -> dict[str, Any]:
    """The response's tokens scored after ``opening`` with the source, then with none.

    The pass with the source follows the check's NLI calls, whose prompt the cache holds
    through the source; the pass without it is made aside, so the cache keeps the source.
    """
    import numpy as np

    ids, owner, starts, ends = _response_tokens(scorer, response, segments)
    if not ids:
        raise ValueError("the response has no tokens")
    variables = {**opening.variables, "question": question}
    scored = {}
    for name, text, aside in (("logp", source, False), ("logp_plain", "", True)):
        messages = render(opening.template, source=text, spotlight=spotlight,
                          **variables).messages
        started = time.perf_counter()
        made = scorer.score_continuation(messages, ids, aside=aside)
        seconds["read" if name == "logp" else "read_plain"] = time.perf_counter() - started
        scored[name] = np.asarray(made.logp, dtype=np.float32)
        calls.append(CallRecord("reading", opening.version, made.usage))
    return {**_token_arrays(ids, owner, starts, ends), **scored}


def _token_arrays(ids: list[int], owner: list[int], starts: list[int], ends: list[int]
                  ) -> dict[str, Any]:
    """The arrays every reading holds about the response's tokens (see ``Reading``)."""
    import numpy as np

    return {name: np.asarray(values, dtype=np.int32)
            for name, values in (("ids", ids), ("segment", owner), ("start", starts),
                                 ("end", ends))}


def _compute(reader: ReadsHiddenStates, source: str, response: str, segments: list[Segment],
             question: str | None, seconds: dict[str, float], spotlight: bool = False
             ) -> dict[str, Any]:
    import numpy as np

    def data_of(text: str) -> str:
        return datamark(defuse(text)) if spotlight else defuse(text)

    data = {"source": data_of(source), "question": data_of(question) if question else None}
    prefix_a, fields = _assemble(reader, READ_TEMPLATE, data, spotlight)
    prefix_b, _ = _assemble(reader, READ_TEMPLATE, {**data, "source": None}, spotlight)
    ids, owner, starts, ends = _response_tokens(reader, response, segments)
    if not ids:
        raise ValueError("the response has no tokens")
    started = time.perf_counter()
    with_source = reader.read_tokens(prefix_a + ids, len(prefix_a))
    seconds["read"] = time.perf_counter() - started
    started = time.perf_counter()
    plain = reader.read_tokens(prefix_b + ids, len(prefix_b))
    seconds["read_plain"] = time.perf_counter() - started
    first, last = fields["source"]
    align = best_match(plain.states[len(prefix_b):], with_source.states[first:last])
    return {
        **_token_arrays(ids, owner, starts, ends),
        "logp": with_source.logp, "entropy": with_source.entropy,
        "logp_plain": plain.logp, "entropy_plain": plain.entropy,
        "align": align.astype(np.float32),
    }


def best_match(rows: Any, source_rows: Any) -> Any:
    """Each row's highest cosine similarity among ``source_rows``, both centred jointly.

    A decoder's raw states share one dominant direction, so every pair would look alike
    without the centring. With no source rows every match is 0.
    """
    import numpy as np

    rows = np.asarray(rows, dtype=np.float64)
    source_rows = np.asarray(source_rows, dtype=np.float64)
    if not len(source_rows):
        return np.zeros(len(rows))
    centre = np.vstack([rows, source_rows]).mean(axis=0)
    return np.asarray((_unit(rows - centre) @ _unit(source_rows - centre).T).max(axis=1))


def _unit(rows: Any) -> Any:
    import numpy as np

    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1.0, norms)


def _messages(name: str, data: dict[str, str | None], spotlight: bool = False) -> list[Any]:
    """The template's messages with a sentinel in place of every piece of data."""
    variables: dict[str, Any] = {
        k: (None if v is None else _SENTINEL.format(k)) for k, v in data.items()
    }
    variables.setdefault("response", _SENTINEL.format("response"))
    return render(name, spotlight=spotlight, **variables).messages


def _assemble(reader: ReadsHiddenStates, name: str, data: dict[str, str | None],
              spotlight: bool = False) -> tuple[list[int], dict[str, tuple[int, int]]]:
    """Token ids of the template up to where the response starts, and each field's span.

    Template text is tokenized as markup, the data between its sentinels as plain text.
    """
    text = reader.apply_template(_messages(name, data, spotlight), generation_prompt=False)
    head, marker, _ = text.partition(_SENTINEL.format("response"))
    if not marker:
        raise ValueError(f"{name}: the chat template dropped the response")
    ids: list[int] = []
    fields: dict[str, tuple[int, int]] = {}
    for number, part in enumerate(_SPLIT.split(head)):
        if number % 2 == 0:
            ids += reader.tokenize(part, special=True) if part else []
            continue
        value = data.get(part)
        if value is None:
            raise ValueError(f"the template asked for missing data {part!r}")
        start = len(ids)
        ids += reader.tokenize(value)
        fields[part] = (start, len(ids))
    fields.setdefault("source", (0, 0))
    return ids, fields


def _response_tokens(
    reader: ReadsHiddenStates | ScoresContinuations, response: str, segments: list[Segment]
) -> tuple[list[int], list[int], list[int], list[int]]:
    """The response's tokens, segment by segment (each with its leading gap).

    Returns the ids, the segment each belongs to and its character offsets in the response.
    """
    ids: list[int] = []
    owner: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    cursor = 0
    for segment in segments:
        for token, start, end in reader.token_spans(response[cursor : segment.end]):
            ids.append(token)
            owner.append(segment.index)
            starts.append(cursor + start)
            ends.append(cursor + end)
        cursor = segment.end
    return ids, owner, starts, ends
