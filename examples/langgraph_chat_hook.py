"""conli as a post-edit hook in a LangGraph chat app, runnable offline.

    chat (a chat model answers from the retrieved source) -> conli (subgraph) -> reply

conli is added with ``check_node(checker)``: it reads ``source`` and ``response`` from the
app's state (in a ``MessagesState`` app: the last AI message and this turn's tool results),
validates them as every front door does, keeps the check deadline, and writes back
``verdict``, ``sentences``, ``refined_text``, ``mitigation`` and the judge scores; the app
keeps its own context. The reply node sends ``reply_text``: the rewrite, or a refusal when
every sentence was removed. The chat node and the model are fakes so this runs without a
network or a GPU; swap in your chat model and ``Checker(Settings(llm=...))``.

Then the same chat model streams its reply: a node forwards the chunks to conli's
``astream_check`` as they arrive and passes each sentence's verdict on to the app's own
stream (LangGraph's ``stream_mode="custom"``) as soon as that sentence is complete.

Run: python examples/langgraph_chat_hook.py
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph

from conli import Checker, Settings, acheck, check_node
from conli.backends.base import Message
from conli.backends.fake import ScriptedBackend
from conli.graph.state import CheckOutput
from conli.hook import astream_check, reply_text

SOURCE = "The Riverside Public Library opened in 1962. It is run by the city council."
DRAFT = "The library opened in 1962. It is run by a private charity."
DECLINED = "I could not give an answer that the source supports."


class ChatState(CheckOutput, total=False):
    """The app's state: the conversation plus the keys the conli subgraph reads and writes."""

    question: str
    source: str  # the retrieved document the answer must be faithful to
    response: str  # the chat model's draft
    answer: str  # what the user finally sees


def fake_chat_model(state: ChatState) -> dict[str, Any]:
    """Stands in for a chat model node: drafts an answer with one unsupported sentence."""
    return {"response": DRAFT}


async def fake_chat_stream(question: str) -> AsyncIterator[str]:
    """Stands in for a chat SDK's streamed reply: the same draft, a few characters at a time."""
    for at in range(0, len(DRAFT), 5):
        await asyncio.sleep(0.01)
        yield DRAFT[at : at + 5]


def reply(state: ChatState) -> dict[str, Any]:
    """Send the rewritten text (only the unsupported sentences were changed), never nothing.

    ``reply_text`` is None when every sentence was removed: decline instead of sending an
    empty message.
    """
    return {"answer": reply_text(state) or DECLINED}


def fake_model(messages: list[Message]) -> str:
    """Answers conli's prompts like a model would (offline stand-in for a real backend)."""
    system, last = messages[0]["content"], messages[-1]["content"]
    if "You write the reasoning" in system:  # the grounded judge explains its findings
        return json.dumps({"reasoning": "The source says the city council runs it, not a "
                                        "charity."})
    if "You grade how faithful" in system:
        wrong = "charity" in last.split("<text>")[-1]
        errors = [{"sentence": "It is run by a private charity.", "source": "the city council",
                   "problem": "the source says the city council runs it"}] if wrong else []
        return json.dumps({"errors": errors, "score": 2 if wrong else 5})
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
    app = StateGraph(ChatState)
    app.add_node("chat", fake_chat_model)
    app.add_node("conli", check_node(checker))  # runs the CoNLI graph as a subgraph
    app.add_node("reply", reply)
    app.add_edge(START, "chat")
    app.add_edge("chat", "conli")
    app.add_edge("conli", "reply")
    app.add_edge("reply", END)
    return app.compile()


def build_streaming_app(checker: Checker) -> Any:
    """A chat app whose reply is checked while it streams, sentence by sentence."""

    async def chat_and_check(state: ChatState) -> dict[str, Any]:
        write = get_stream_writer()
        chunks: list[str] = []

        async def forwarded() -> AsyncIterator[str]:  # the reply as the user sees it arrive
            async for chunk in fake_chat_stream(state["question"]):
                chunks.append(chunk)
                yield chunk

        sentences = []
        async for event in astream_check(state["source"], forwarded(), checker=checker,
                                         question=state["question"]):
            if event.event == "sentence":
                sentences.append(event.sentence)
                write({"sentence": event.sentence.text, "verdict": event.sentence.verdict,
                       "reply_so_far": len("".join(chunks))})
        return {"response": "".join(chunks), "sentences": sentences}

    app = StateGraph(ChatState)
    app.add_node("chat", chat_and_check)
    app.add_edge(START, "chat")
    app.add_edge("chat", END)
    return app.compile()


async def stream_demo(checker: Checker) -> None:
    """Print each verdict the moment the app streams it, while the reply is still arriving."""
    app = build_streaming_app(checker)
    inputs = {"question": "Who runs the library?", "source": SOURCE}
    async for update in app.astream(inputs, stream_mode="custom"):
        print(f"streamed: [{update['verdict']}] {update['sentence']} "
              f"(after {update['reply_so_far']} of {len(DRAFT)} characters)")


def main() -> None:
    """Run the app once as a graph, then use the async hook directly."""
    checker = Checker(Settings(), backend=ScriptedBackend(responder=fake_model))
    state = build_app(checker).invoke({"question": "Who runs the library?", "source": SOURCE})
    flagged = [s.text for s in state["sentences"] if s.verdict == "hallucinated"]
    print("draft:   ", state["response"])
    print("flagged: ", flagged)
    print("answer:  ", state["answer"])
    print("judge:   ", f'{state["judge_raw"].score:g} -> {state["judge_refined"].score:g}')

    # The same check as an async post-edit hook, reusing the checker's graph and backend.
    result = asyncio.run(acheck(SOURCE, state["response"], checker=checker))
    print("acheck:  ", result.verdict, "|", result.refined_text)

    # The reply checked while it streams: a verdict per sentence as soon as it is complete.
    asyncio.run(stream_demo(checker))


if __name__ == "__main__":
    main()
