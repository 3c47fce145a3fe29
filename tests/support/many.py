"""Many pairs at once: a detect-only configuration, and a model that counts calls in flight."""

from __future__ import annotations

import threading
from collections.abc import Callable

from conli import Settings
from conli.backends.base import Message
from conli.backends.fake import ScriptedBackend
from tests.support import scripted

SOURCE = "The library opened in 1962. It lends books free of charge."
DETECT = {"detectors": ["cot"], "entity_level": False, "mitigate": False, "judge": False,
          "word_scores": "off"}


def _backend(responder: Callable[[list[Message]], object]) -> ScriptedBackend:
    """A scripted model answering in the batch format ``scripted.responder`` writes."""
    return ScriptedBackend(responder=responder, judges_batches=True)  # type: ignore[arg-type]


def _settings(**more: object) -> Settings:
    return Settings(**{**DETECT, **more})  # type: ignore[arg-type]


class Peak:
    """Counts model calls in flight; each waits at a barrier of ``parties`` calls.

    The barrier makes the peak reach ``parties`` whenever that many checks may run at once
    (no timing), so a peak above it can only come from a looser bound.
    """

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=30)
        self.lock = threading.Lock()
        self.now = self.peak = 0
        self.answer = scripted.responder()

    def __call__(self, messages: list[Message]) -> str:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            self.barrier.wait()
            return self.answer(messages)
        finally:
            with self.lock:
                self.now -= 1
