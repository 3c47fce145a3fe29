"""Test helper: a ScriptedBackend answering every conli prompt by reading it.

The answers are ``conli.backends.fake.reading_responder``'s: claims containing a flag word
(default ``FALSE``) are contradicted, the rest entailed; the editor replaces the flag word;
the judge gives 2 when the text still holds it, else 5. Also registers a ``fake`` backend
spec when ``CONLI_TEST_FAKE`` is set, for subprocesses (never part of the production
registry).
"""

from __future__ import annotations

import os

from pydantic import BaseModel, Field

from conli.backends import register_backend
from conli.backends.base import Backend
from conli.backends.fake import FLAG, ScriptedBackend
from conli.backends.fake import reading_responder as responder
from conli.config import Settings

__all__ = ["FLAG", "JudgeAnswer", "backend", "responder"]


class JudgeAnswer(BaseModel):
    """A small reasoning-then-score answer (the v1 judge's shape), for structured-output tests."""

    reasoning: str = Field(max_length=4000)
    score: int = Field(ge=1, le=5)


def backend(*, sleep: float = 0.0, concurrency: int = 1) -> ScriptedBackend:
    """A scripted backend answering like a model, ``concurrency`` calls at a time."""
    return ScriptedBackend(responder=responder(sleep=sleep), judges_batches=True,
                           max_concurrency=concurrency)


def _fake_factory(_arg: str, _settings: Settings) -> Backend:
    sleep = float(os.environ.get("CONLI_TEST_FAKE_SLEEP", "0"))
    return backend(sleep=sleep, concurrency=int(os.environ.get("CONLI_TEST_FAKE_CONCURRENCY", "2")))


if os.environ.get("CONLI_TEST_FAKE"):
    register_backend("fake", _fake_factory)
