"""A scripted model whose prompt cache holds one prompt, as the embedded model's one slot does.

Used by the tests that count how often a source is read anew (``test_shared_prefix``,
``test_batch_sources``).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from conli.backends.base import Completion, CompletionRequest, Message
from conli.backends.fake import ScriptedBackend


def flat(messages: list[Message]) -> str:
    """The prompt as a chat template lays it out (ChatML, as the embedded Qwen's)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def common(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` share from their start."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


class OneSlotCache(ScriptedBackend):
    """A model whose prompt cache keeps only the last prompt (a llama.cpp slot on its own).

    Each call's usage counts as cached what its prompt shares with the call before, as
    llama.cpp's does (one character a token); ``prefilled`` keeps what each call had to
    read anew. ``clear()`` forgets the cached prompt, as a new process would.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.last, self.prefilled = "", []
        self._lock = threading.Lock()  # one slot: one call at a time, as the embedded model

    def complete(self, request: CompletionRequest) -> Completion:
        with self._lock:
            prompt = flat(list(request.messages))
            cached = common(prompt, self.last)
            self.last = prompt
            self.prefilled.append(prompt[cached:])
            done = super().complete(request)
        return replace(done, usage=replace(done.usage, prompt_tokens=len(prompt),
                                           cached_tokens=cached))

    def clear(self) -> None:
        """Forget the cached prompt."""
        self.last = ""

    def reads(self, text: str) -> int:
        """How many calls read ``text`` anew (it was not in the cached prefix)."""
        return sum(text in part for part in self.prefilled)
