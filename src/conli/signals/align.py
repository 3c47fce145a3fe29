"""Semantic word scores: response words aligned to the source by the model's hidden states.

In the spirit of BERTScore (seed 001 notes it matched its ROUGE results): each content word
of the response is as supported as its best match among the source's tokens, by cosine
similarity of the embedded model's final hidden states. Both texts are read as plain text
(no template), each in its own forward pass; states are centred on their joint mean first,
because a decoder's raw states share one dominant direction and would all look alike.
Seed 001's gradient salience needs a differentiable model, which conli does not ship.
"""

from __future__ import annotations

from typing import Any, cast

from conli.backends.base import Backend, ReadsHiddenStates
from conli.config import Language
from conli.errors import BackendError
from conli.models import WordScore
from conli.signals.lexical import words
from conli.signals.reader import best_match


def semantic_word_scores(backend: Backend, source: str, response: str,
                         memo: dict[tuple[str, str], Any] | None = None,
                         language: Language = "en") -> list[WordScore]:
    """1 - the best cosine match of each response content word's tokens among the source's.

    Content words: ``language``'s stop words dropped.

    ``memo`` keeps each text's hidden states (and a response's word pieces) across calls
    (an evaluation reads the same texts many times); None reads every text afresh.
    """
    import numpy as np

    if not backend.capabilities.hidden_states:
        raise BackendError(f"semantic word scores need hidden states, which the {backend.name} "
                           "backend does not give; use word_scores=lexical")
    reader = cast(ReadsHiddenStates, backend)
    found = words(response, language)
    if not found:
        return []
    memo = {} if memo is None else memo
    if ("source", source) not in memo:
        memo[("source", source)] = _states(reader, reader.tokenize(source))
    if ("response", response) not in memo:  # its pieces too: a tokenize call per word
        ids, owner = _pieces(reader, response, [(start, end) for _, start, end, _ in found])
        memo[("response", response)] = (owner, _states(reader, ids))
    owner, states = memo[("response", response)]
    best = best_match(states, memo[("source", source)])
    owners = np.asarray(owner)
    scores = []
    for number, (word, start, end, _) in enumerate(found):
        mine = best[owners == number]
        value = float(mine.mean()) if mine.size else 0.0
        scores.append(WordScore(text=word, start=start, end=end, method="semantic",
                                score=min(1.0, max(0.0, 1.0 - value))))
    return scores


def _pieces(reader: ReadsHiddenStates, text: str,
            spans: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Token ids of ``text`` cut before each word's end, and the word each token belongs to.

    A piece runs from the previous word's end to this word's end, so " opened" keeps its
    leading space as the tokenizer expects; the tail after the last word belongs to none (-1).
    """
    ids: list[int] = []
    owner: list[int] = []
    cursor = 0
    for number, (_, end) in enumerate(spans):
        piece = reader.tokenize(text[cursor:end])
        ids += piece
        owner += [number] * len(piece)
        cursor = end
    tail = reader.tokenize(text[cursor:]) if text[cursor:].strip() else []
    return ids + tail, owner + [-1] * len(tail)


def _states(reader: ReadsHiddenStates, ids: list[int]) -> Any:
    """Hidden states of ``ids`` read as plain text (nothing scored)."""
    return reader.read_tokens(ids, len(ids)).states if ids else []
