"""Test helper: a ScriptedBackend responder that answers every conli prompt by reading it.

Claims containing a flag word (default ``FALSE``) are contradicted, the rest entailed; the
editor replaces the flag word; the judge gives 2 when the text still holds it, else 5.
Also registers a ``fake`` backend spec when ``CONLI_TEST_FAKE`` is set, for subprocesses
(never part of the production registry).
"""

from __future__ import annotations

import json
import os
import re
import time

from pydantic import BaseModel, Field

from conli.backends import register_backend
from conli.backends.base import Backend, Message
from conli.backends.fake import Responder, ScriptedBackend
from conli.config import Settings

FLAG = "FALSE"


class JudgeAnswer(BaseModel):
    """A small reasoning-then-score answer (the v1 judge's shape), for structured-output tests."""

    reasoning: str = Field(max_length=4000)
    score: int = Field(ge=1, le=5)


def responder(*, sleep: float = 0.0, flag: str = FLAG) -> Responder:
    """Answer NLI, mitigation and judge prompts deterministically, after ``sleep`` seconds."""

    def respond(messages: list[Message]) -> str:
        if sleep:
            time.sleep(sleep)
        system, last = messages[0]["content"], messages[-1]["content"]
        if "You write the reasoning" in system:
            return json.dumps({"reasoning": "Detection found a statement the source contradicts."})
        if "You grade how faithful" in system:
            text = last.split("<text>")[-1].split("</text>")[0]
            wrong = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if flag in s]
            return json.dumps({"errors": [{"sentence": s, "problem": "contradicted by the "
                                           "source", "source": ""} for s in wrong],
                               "score": 2 if wrong else 5})
        if "You are an editor" in system:
            found = re.findall(r'<sentence id="(\d+)">(.*?)</sentence>', last, re.S)
            return json.dumps({"rewrites": [
                {"id": int(i), "fix": "x", "action": "rewrite", "text": t.replace(flag, "true")}
                for i, t in found]})
        claims = re.findall(r'<claim id="(\d+)">(.*?)</claim>', last, re.S)
        return json.dumps({"judgements": [
            {"id": int(i), "evidence": "the source says so" if flag not in t else "quoted source",
             "reasoning": "contradicted by the source" if flag in t else "stated in the source",
             "label": "contradiction" if flag in t else "entailment"}
            for i, t in claims]})

    return respond


def backend(*, sleep: float = 0.0, concurrency: int = 1) -> ScriptedBackend:
    """A scripted backend answering like a model, ``concurrency`` calls at a time."""
    return ScriptedBackend(responder=responder(sleep=sleep), judges_batches=True,
                           max_concurrency=concurrency)


def _fake_factory(_arg: str, _settings: Settings) -> Backend:
    sleep = float(os.environ.get("CONLI_TEST_FAKE_SLEEP", "0"))
    return backend(sleep=sleep, concurrency=int(os.environ.get("CONLI_TEST_FAKE_CONCURRENCY", "2")))


if os.environ.get("CONLI_TEST_FAKE"):
    register_backend("fake", _fake_factory)
