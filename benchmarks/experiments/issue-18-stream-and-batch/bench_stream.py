"""Time to verdict of a streamed check: from a sentence's completion to its verdict.

A reply is streamed into ``Checker.astream`` in chunks of a few characters at a chat
model's pace. A sentence is complete when the chunk that begins the next sentence is
produced (or, for the last, when the stream ends); its latency runs from that moment to
the moment its verdict reaches the consumer. Reported: median, p95 and max over all
sentences, and the part of each that is not model time (calls x the scripted delay).

    # from the checkout; DIR = benchmarks/experiments/issue-18-stream-and-batch
    python DIR/bench_stream.py                       # scripted backend: fixed delay per call
    python DIR/bench_stream.py --lockstep            # no queueing: wait for each verdict
    python DIR/bench_stream.py --llm local           # the embedded model (slow: minutes)

With ``--lockstep`` the producer, having begun a sentence, waits for the previous
sentence's verdict before it streams on, so no check waits behind another and the latency
is the time to verdict alone. Without it the reply streams at the chat pace regardless,
and a sentence's latency includes waiting for the checks before it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import statistics
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conli.backends.base import Message
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.evaluation.report import git_state
from conli.pipeline import Checker
from conli.streaming import DoneEvent, SentenceEvent
from conli.text.nlp import load_pipeline
from conli.text.segment import split_response

SCRIPT = "/".join(Path(__file__).resolve().parts[-4:])  # as run from the checkout

ROOT = Path(__file__).resolve().parents[3]
SOURCE = (ROOT / "examples" / "source.txt").read_text()
SENTENCES = [  # each one stated by examples/source.txt, with its numbers and abbreviations
    "Millbrook opened a new public swimming pool on Saturday, June 14.",
    "The pool cost 2.4 million dollars to build.",
    "It was paid for by a regional sports grant and local fundraising.",
    "It has six lanes and a separate shallow pool for young children.",
    "Mayor Helen Ortiz said it would be open from 7 a.m. to 9 p.m. every day.",
    "Entry is free for residents under 16.",
    "Adults pay three dollars per visit.",
    "About 800 people visited on the first day.",
    "The old pool had been closed since 2019 because of cracks in its foundation.",
]
CLAIM = re.compile(r'<claim(?: id="(\d+)")?>(.*?)</claim>', re.S)


def scripted(delay: float) -> ScriptedBackend:
    """A backend that entails every claim after ``delay`` seconds per call (no model)."""

    def respond(messages: list[Message]) -> str:
        time.sleep(delay)
        claims = CLAIM.findall(messages[-1]["content"])
        answer = {"evidence": "quoted", "reasoning": "stated in the source", "label": "entailment"}
        if len(claims) == 1 and not claims[0][0]:  # one claim per call (v3): a bare object
            return json.dumps(answer)
        return json.dumps({"judgements": [{"id": int(i), **answer} for i, _ in claims]})

    return ScriptedBackend(responder=respond)


def reply_of(count: int) -> str:
    """``count`` sentences, cycling through the supported ones."""
    return " ".join(SENTENCES[i % len(SENTENCES)] for i in range(count))


class Producer:
    """Streams the reply in chunks at a fixed pace and notes when each sentence completes."""

    def __init__(self, reply: str, starts: list[int], args: argparse.Namespace) -> None:
        self.reply, self.args = reply, args
        self.starts = starts  # where each sentence begins: its first chunk completes the one before
        self.completed: dict[int, float] = {}
        self.verdicts: dict[int, asyncio.Event] = {}

    def verdict(self, index: int) -> asyncio.Event:
        return self.verdicts.setdefault(index, asyncio.Event())

    async def chunks(self) -> AsyncIterator[str]:
        size, begins = self.args.chunk_chars, {start: i for i, start in enumerate(self.starts)}
        for at in range(0, len(self.reply), size):
            chunk = self.reply[at : at + size]
            began = [begins[p] for p in range(at, at + len(chunk)) if begins.get(p)]
            for sentence in began:
                self.completed[sentence - 1] = time.perf_counter()
            yield chunk
            for sentence in began:
                if self.args.lockstep:
                    await self.verdict(sentence - 1).wait()
            await asyncio.sleep(self.args.chunk_delay)
        self.completed[len(self.starts) - 1] = time.perf_counter()


async def measure(checker: Checker, args: argparse.Namespace) -> dict[str, Any]:
    reply = reply_of(args.sentences)
    starts = [s.start for s in split_response(reply, checker.deps.nlp)]
    producer = Producer(reply, starts, args)
    received: dict[int, float] = {}
    events: list[SentenceEvent] = []
    done: DoneEvent | None = None
    async for event in checker.astream(SOURCE, producer.chunks()):
        if isinstance(event, SentenceEvent):
            received[event.sentence.index] = time.perf_counter()
            producer.verdict(event.sentence.index).set()
            events.append(event)
        else:
            done = event
    assert done is not None and len(events) == len(starts)
    latency = [received[i] - producer.completed[i] for i in range(len(starts))]
    model = [e.usage.calls * args.call_delay for e in events] if args.llm == "scripted" else [
        e.usage.seconds for e in events]
    return {"sentences": len(starts), "reply_chars": len(reply), "verdict": done.verdict,
            "calls": done.usage.calls, "latency": summary(latency),
            "beyond_model_time": summary([t - m for t, m in zip(latency, model, strict=True)]),
            "stream_seconds": done.seconds}


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median": statistics.median(ordered), "p95": p95, "max": ordered[-1]}


def commit() -> str:
    """The short commit of the conli that ran, said to be uncommitted where it was."""
    head, dirty = git_state()
    short = head[:7] if head else "unknown"
    return f"uncommitted tree on {short}" if dirty else short


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="scripted", help="scripted (default) or a backend spec")
    parser.add_argument("--sentences", type=int, default=36)
    parser.add_argument("--call-delay", type=float, default=0.2, help="scripted: s per call")
    parser.add_argument("--chunk-chars", type=int, default=4, help="characters per chunk")
    parser.add_argument("--chunk-delay", type=float, default=0.025, help="s between chunks")
    parser.add_argument("--lockstep", action="store_true",
                        help="wait for each verdict before streaming on (no queueing)")
    args = parser.parse_args()
    load_pipeline()
    if args.llm == "scripted":
        checker = Checker(Settings(mitigate=False, judge=False), backend=scripted(args.call_delay))
    else:
        checker = Checker(Settings(llm=args.llm, mitigate=False, judge=False))
    try:
        result = asyncio.run(measure(checker, args))
    finally:
        checker.close()
    print(json.dumps({
        "command": " ".join([f"python {SCRIPT}", *sys.argv[1:]]),
        "settings": vars(args),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit(),
        "backend": checker.backend.name, "model": checker.backend.model,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(), **result,
    }, indent=2))


if __name__ == "__main__":
    main()
