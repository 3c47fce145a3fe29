"""Test helper: a tiny deterministic 'model' behind the forward-pass contract (no llama.cpp).

``TinyReader`` implements ``ReadsHiddenStates`` with numpy: characters are tokens, hidden
states are a fixed function of token and position, and log-probabilities come from a
small random output matrix. ``ReadingBackend`` adds the eval tests' string-matching NLI
answers, so every detector, the fused one included, runs end to end on it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from conli.backends.base import CallUsage, Capabilities, Message, ScoredTokens, TokenReading
from conli.backends.fake import ScriptedBackend
from tests.support.eval_fakes import respond


class TinyReader:
    """The forward-pass half of a backend; ``broken`` makes every state NaN."""

    vocab, dim = 64, 8

    def __init__(self, *, broken: bool = False) -> None:
        self.broken = broken
        self.matrix = np.random.default_rng(0).normal(size=(self.vocab, self.dim))
        self.reads: list[tuple[int, int]] = []  # (len(ids), score_from) of every pass
        self.scored: list[tuple[str, bool]] = []  # (prompt text, aside) of every scoring
        self.slot: list[int] = []  # the prompt a one-slot cache holds

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        return [ord(c) % self.vocab for c in text]

    def token_spans(self, text: str) -> list[tuple[int, int, int]]:
        return [(ord(c) % self.vocab, i, i + 1) for i, c in enumerate(text)]

    def apply_template(self, messages: list[Message], *, generation_prompt: bool) -> str:
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages)
        return text + ("<assistant>" if generation_prompt else "")

    def read_tokens(self, ids: list[int], score_from: int) -> TokenReading:
        self.reads.append((len(ids), score_from))
        states = np.sin(np.outer(np.arange(len(ids)) + np.asarray(ids), np.arange(1, 9)))
        if self.broken:
            states[:] = np.nan
        logits = states[score_from - 1 : len(ids) - 1] @ self.matrix.T
        log_norm = np.log(np.exp(logits).sum(axis=1))
        logp = logits[np.arange(len(logits)), ids[score_from:]] - log_norm
        probs = np.exp(logits - log_norm[:, None])
        entropy = -(probs * (logits - log_norm[:, None])).sum(axis=1)
        return TokenReading(states.astype(np.float32), logp.astype(np.float32),
                            entropy.astype(np.float32))


    def score_continuation(self, messages: list[Message], ids: list[int], *,
                           aside: bool = False) -> ScoredTokens:
        """The forward pass's log-probabilities, with a one-slot cache's usage."""
        text = self.apply_template(messages, generation_prompt=True)
        prefix = self.tokenize(text)
        self.scored.append((text, aside))
        cached = next((i for i, (a, b) in enumerate(zip(prefix, self.slot, strict=False))
                       if a != b), min(len(prefix), len(self.slot)))
        if not aside:
            self.slot = prefix
        logp = self.read_tokens(prefix + ids, len(prefix)).logp
        return ScoredTokens(logp, CallUsage(prompt_tokens=len(prefix), cached_tokens=cached,
                                            completion_tokens=len(ids)))


class ReadingBackend(TinyReader, ScriptedBackend):
    """A backend that reads itself (like the embedded model) and answers NLI by matching."""

    name, model = "reading", "tiny"

    def __init__(self, **declared: Any) -> None:
        TinyReader.__init__(self)
        ScriptedBackend.__init__(self, responder=respond, capabilities=Capabilities(
            hidden_states=True, judges_batches=False, context_window=8192), **declared)
