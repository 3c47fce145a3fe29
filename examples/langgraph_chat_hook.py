"""conli as a post-edit hook in a LangGraph chat app, runnable offline.

    chat (a chat model answers from the retrieved source) -> conli (subgraph) -> reply

The compiled conli graph is added as a subgraph node: it reads ``source`` and ``response``
from the app's state and writes back ``sentences``, ``refined_text``, ``mitigation`` and the
judge scores. The app is invoked with ``context=checker.deps``, which LangGraph passes down
to the subgraph. The chat node and the model are fakes so this runs without a network or a
GPU; swap in your chat model and ``Checker(Settings(llm=...))``.

Run: python examples/langgraph_chat_hook.py
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from langgraph.graph import END, START, StateGraph

from conli import Checker, Settings, acheck
from conli.backends.base import Message
from conli.backends.fake import ScriptedBackend
from conli.graph import Deps
from conli.graph.state import CheckOutput

SOURCE = "The Riverside Public Library opened in 1962. It is run by the city council."


class ChatState(CheckOutput, total=False):
    """The app's state: the conversation plus the keys the conli subgraph reads and writes."""

    question: str
    source: str  # the retrieved document the answer must be faithful to
    response: str  # the chat model's draft
    answer: str  # what the user finally sees


def fake_chat_model(state: ChatState) -> dict[str, Any]:
    """Stands in for a chat model node: drafts an answer with one unsupported sentence."""
    draft = "The library opened in 1962. It is run by a private charity."
    return {"response": draft}


def reply(state: ChatState) -> dict[str, Any]:
    """Send the rewritten text: only the unsupported sentences were changed."""
    return {"answer": state["refined_text"]}


def fake_model(messages: list[Message]) -> str:
    """Answers conli's prompts like a model would (offline stand-in for a real backend)."""
    system, last = messages[0]["content"], messages[-1]["content"]
    if "You grade how faithful" in system:
        return json.dumps({"reasoning": "compared with the source", "score":
                           2 if "charity" in last.split("<text>")[-1] else 5})
    if "You are an editor" in system:
        ids = re.findall(r'<sentence id="(\d+)">', last)
        return json.dumps({"rewrites": [{"id": int(i), "fix": "x", "action": "rewrite",
                                         "text": "It is run by the city council."} for i in ids]})
    (claim,) = re.findall(r"<claim>(.*?)</claim>", last, re.S)  # one claim per call
    wrong = "charity" in claim
    return json.dumps({"evidence": "It is run by the city council." if wrong else claim,
                       "reasoning": "the source names the council" if wrong else "stated",
                       "label": "contradiction" if wrong else "entailment"})


def build_app(checker: Checker) -> Any:
    """Build the chat app with conli's compiled graph as the step after the chat model."""
    app = StateGraph(ChatState, context_schema=Deps)
    app.add_node("chat", fake_chat_model)
    app.add_node("conli", checker.graph)  # the compiled CoNLI graph, as a subgraph
    app.add_node("reply", reply)
    app.add_edge(START, "chat")
    app.add_edge("chat", "conli")
    app.add_edge("conli", "reply")
    app.add_edge("reply", END)
    return app.compile()


def main() -> None:
    """Run the app once as a graph, then use the async hook directly."""
    checker = Checker(Settings(), backend=ScriptedBackend(responder=fake_model))
    state = build_app(checker).invoke(
        {"question": "Who runs the library?", "source": SOURCE}, context=checker.deps
    )
    flagged = [s.text for s in state["sentences"] if s.verdict == "hallucinated"]
    print("draft:   ", state["response"])
    print("flagged: ", flagged)
    print("answer:  ", state["answer"])
    print("judge:   ", state["judge_raw"].score, "->", state["judge_refined"].score)

    # The same check as an async post-edit hook, reusing the checker's graph and backend.
    result = asyncio.run(acheck(SOURCE, state["response"], checker=checker))
    print("acheck:  ", result.verdict, "|", result.refined_text)


if __name__ == "__main__":
    main()
