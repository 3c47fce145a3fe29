"""A scripted backend for tests: replies come from a queue or a function, never a model.

It sits behind the same contract as real backends, so tests drive every node and the
whole graph without a model, and can script failures (exceptions) at any call.
``reading_responder`` answers every conli prompt by reading it (the tests' and the
benchmarks' stand-in for a model that follows the prompts).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from conli.backends.base import CallUsage, Capabilities, Completion, CompletionRequest, Message

Reply = str | Completion | BaseException
Responder = Callable[[list[Message]], Reply]


class ScriptedBackend:
    """Answers each call with the next scripted reply, or with ``responder(messages)``.

    A reply that is an exception is raised instead of returned. Every call's messages
    are kept in ``calls`` so tests can assert what was asked.
    """

    name = "fake"
    model = "scripted"

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        responder: Responder | None = None,
        capabilities: Capabilities | None = None,
        **declared: Any,
    ) -> None:
        """``declared`` sets single ``Capabilities`` fields, e.g. ``judges_batches=True``."""
        self._replies = list(replies)
        self._responder = responder
        base = capabilities or Capabilities(judges_batches=False)
        self.capabilities = replace(base, **declared)
        self.calls: list[list[Message]] = []
        self.schemas: list[dict[str, Any] | None] = []

    def complete(self, request: CompletionRequest) -> Completion:
        """Return (or raise) the next scripted reply."""
        messages = request.messages
        self.calls.append(list(messages))
        self.schemas.append(request.json_schema)
        if self._replies:
            reply = self._replies.pop(0)
        elif self._responder is not None:
            reply = self._responder(list(messages))
        else:
            raise AssertionError(f"unscripted call #{len(self.calls)}")
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, Completion):
            return reply
        usage = CallUsage(
            prompt_tokens=sum(len(m["content"]) // 4 for m in messages),
            completion_tokens=len(reply) // 4,
        )
        return Completion(text=reply, usage=usage, finish_reason="stop")

    def close(self) -> None:
        """Nothing to release."""


FLAG = "FALSE"  # the word that makes ``reading_responder`` contradict a claim


def reading_responder(*, sleep: float = 0.0, flag: str = FLAG) -> Responder:
    """Answer NLI, rewrite and judge prompts by reading them, after ``sleep`` seconds.

    Claims holding ``flag`` are contradicted, the rest entailed; the editor replaces the
    flag word; the judge gives 2 while the text still holds it, else 5.
    """

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
