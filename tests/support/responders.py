"""A scripted model that answers every conli prompt by rules, and the prompt readers it uses.

``rule_responder`` calls a claim unsupported when it holds a ``bad`` substring; ``nli`` runs
NLI on a backend as the pipeline does. The conftest's ``make_backend`` fixture builds on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from conli.agents.nli import Hypothesis, run_nli
from conli.agents.nli_prompts import resolve
from conli.agents.structured import CallRecord
from conli.backends.base import Backend, Message
from conli.config import Settings
from conli.models import Judgement
from tests.support.http_fakes import Reply, Request, openai_chat

CLAIM = re.compile(r'<claim(?: id="(\d+)")?>(.*?)</claim>', re.DOTALL)  # v3 has no id
SENTENCE = re.compile(r'<sentence id="(\d+)">(.*?)</sentence>', re.DOTALL)


def claims_of(messages: list[Message]) -> list[str]:
    """The claims of the request being made (the last user message), in order."""
    return [text for _, text in CLAIM.findall(messages[-1]["content"])]


def kind_of(messages: list[Message]) -> str:
    """Which agent a prompt belongs to, from its system message (or, for a prompt in the
    shared layout, which opens as NLI's does, from its task)."""
    system, task = messages[0]["content"], messages[-1]["content"]
    if "you correct a TEXT" in task:
        return "mitigate"
    if "you grade how faithful a whole TEXT" in task:
        return "judge"
    if "you write the reasoning behind a faithfulness score" in task:
        return "reasoning"
    if "editor" in system:
        return "mitigate"
    if "fact checker" in system:
        return "nli"
    if "You write the reasoning" in system:
        return "reasoning"
    return "judge"


REASONING = json.dumps({"reasoning": "Detection found statements the source does not support."})


def nli_answer(labels: list[str], messages: list[Message] | None = None) -> str:
    """An NLI answer with ``labels``, in the format the prompt in ``messages`` asks for.

    The one-claim prompt (v3, claims without ids) takes a bare object; else a batch.
    """
    one_claim = messages is not None and '<claim id="' not in messages[-1]["content"]
    if one_claim and len(labels) == 1:
        (label,) = labels
        return json.dumps({"evidence": "quoted", "reasoning": f"because {label}", "label": label})
    return json.dumps(
        {
            "judgements": [
                {"id": i, "evidence": "quoted", "reasoning": f"because {label}", "label": label}
                for i, label in enumerate(labels)
            ]
        }
    )


def rule_responder(
    bad: tuple[str, ...] = (),
    judge_scores: tuple[int, int] = (2, 5),
    rewrite: Callable[[str], str] | None = None,
) -> Callable[[list[Message]], str]:
    """A model that calls a claim unsupported when it contains any ``bad`` substring.

    The mitigation agent rewrites with ``rewrite`` (or removes); the judge gives the
    first score to texts containing a bad substring and the second otherwise.
    """

    def respond(messages: list[Message]) -> str:
        kind = kind_of(messages)
        if kind == "nli":
            labels = [
                "neutral" if any(b in c for b in bad) else "entailment" for c in claims_of(messages)
            ]
            return nli_answer(labels, messages)
        if kind == "mitigate":
            items = SENTENCE.findall(messages[-1]["content"])
            rewrites: list[dict[str, Any]] = []
            for sid, text in items:
                new = rewrite(text) if rewrite else ""
                rewrites.append(
                    {
                        "id": int(sid),
                        "fix": "x",
                        "action": "rewrite" if new else "remove",
                        "text": new,
                    }
                )
            return json.dumps({"rewrites": rewrites})
        if kind == "reasoning":
            return REASONING
        text = messages[-1]["content"].split("<text>")[-1].split("</text>")[0]
        flagged = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if any(b in s for b in bad)]
        score = judge_scores[0] if flagged else judge_scores[1]
        return json.dumps({"errors": [{"sentence": s, "problem": "not in the source",
                                       "source": ""} for s in flagged], "score": score})

    return respond


def nli(
    backend: Backend, source: str, hypotheses: list[Hypothesis], *, kind: Any, settings: Settings
) -> tuple[list[Judgement], list[CallRecord]]:
    """``run_nli`` with ``settings`` resolved for ``backend``, as the pipeline does once."""
    return run_nli(backend, source, hypotheses, kind=kind, settings=resolve(settings, backend))


class Provider:
    """An OpenAI-compatible server: ``/models`` names one model; chats answer by rule.

    Claims holding "Paris" are unsupported; ``rewrite`` is the editor's (default: none).
    ``kinds`` records what each chat was (``kind_of``), in order.
    """

    def __init__(self, rewrite: Callable[[str], str] | None = None) -> None:
        self.model = rule_responder(bad=("Paris",), rewrite=rewrite)
        self.kinds: list[str] = []

    def __call__(self, request: Request) -> Reply:
        if request.path.endswith("/models"):
            return Reply(200, {"object": "list", "data": [{"id": "served", "object": "model"}]})
        self.kinds.append(kind_of(request.body["messages"]))
        return Reply(200, openai_chat(self.model(request.body["messages"])))
