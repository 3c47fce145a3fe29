"""Test helper for the eval tests: a responder that answers by string matching the source.

A claim is entailed iff its text (entity tags removed, end punctuation dropped) occurs in
the source; the editor replaces each flagged sentence by the source's first sentence; the
judge scores round(5 - 4 * share of the text's sentences not found in the source); the
grounded judge's reasoning quotes the first flagged sentence.
"""

from __future__ import annotations

import json
import re

from conli.backends.base import Message
from conli.backends.fake import ScriptedBackend

_SENT = re.compile(r"(?<=[.!?])\s+")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("[ ", "").replace(" ]", "")).strip().rstrip(".!?")


def _between(text: str, tag: str) -> str:
    return text.split(f"<{tag}>")[-1].split(f"</{tag}>")[0].strip()


def respond(messages: list[Message]) -> str:
    system = messages[0]["content"]
    if "reasoning behind a faithfulness score" in system:
        flagged = re.findall(r"<finding [^>]*>(.*?) \|", messages[-1]["content"])
        return json.dumps({"reasoning": f'"{flagged[0]}" is not supported.' if flagged
                           else "Every sentence is supported."})
    user = next(m["content"] for m in reversed(messages) if "<source>" in m["content"])
    source = _between(user, "source")
    if "You grade how faithful" in system:
        sentences = [s for s in _SENT.split(_between(user, "text")) if s.strip()]
        missing = [s for s in sentences if _norm(s) not in source]
        score = round(5 - 4 * len(missing) / max(1, len(sentences)))
        return json.dumps({"errors": [{"sentence": s, "problem": "not in the source",
                                       "source": ""} for s in missing], "score": score})
    if "<sentence id=" in user:
        first = _SENT.split(source)[0]
        ids = re.findall(r'<sentence id="(\d+)">', user)
        return json.dumps({"rewrites": [{"id": int(i), "fix": "x",
                                         "action": "rewrite", "text": first}
                                        for i in ids]})
    if "<claim>" in user:  # the one-claim prompt (v3): a bare object
        (claim,) = re.findall(r"<claim>(.*?)</claim>", user, re.S)
        label = "entailment" if _norm(claim) in source else "contradiction"
        return json.dumps({"evidence": "quoted", "reasoning": "string match", "label": label})
    claims = re.findall(r'<claim id="(\d+)">(.*?)</claim>', user, re.S)
    return json.dumps({"judgements": [
        {"id": int(i), "evidence": "quoted", "reasoning": "string match",
         "label": "entailment" if _norm(c) in source else "contradiction"}
        for i, c in claims]})


def backend() -> ScriptedBackend:
    return ScriptedBackend(responder=respond)
