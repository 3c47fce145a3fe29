"""Calls in a row on a hosted backend: check, rewrite, the rewrite's check, and the judge.

The grounded judge writes its reasoning from the findings (the default): it makes no call,
so a check that rewrites makes three calls, each after the one before (detect, rewrite,
verify the rewrite), where the model's reasoning made four (issue 64.6). The chain stays
three: the reasoning ran beside the rewrite already, and the rewrite's check needs the
rewrite. With ``judge_reasoning = model`` the raw judge's call still runs beside the rewrite.

A scripted OpenAI-compatible server on loopback holds each call a fixed time and records
when it started and ended; the test asserts on their order and overlap, never on times.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from conli.backends import get_backend
from conli.config import Settings
from conli.pipeline import Checker
from tests.support.http_fakes import Reply, Request, openai_chat, serve
from tests.support.responders import kind_of, rule_responder

SOURCE = "Ada Lovelace lived in London. In 1843 she published notes on the Analytical Engine."
RESPONSE = "Ada Lovelace lived in Paris. In 1843 she published notes on the engine."
HOLD = 0.2  # seconds each call takes on the "server"


@dataclass(frozen=True)
class Call:
    kind: str
    start: float
    end: float


def in_a_row(calls: list[Call]) -> int:
    """The longest chain of calls each of which started after the one before it ended."""
    longest: dict[int, int] = {}
    for i, call in sorted(enumerate(calls), key=lambda item: item[1].start):
        before = [longest[j] for j in longest if calls[j].end <= call.start]
        longest[i] = 1 + max(before, default=0)
    return max(longest.values(), default=0)


def _check(concurrency: int, reasoning: str = "findings") -> tuple[list[Call], Any]:
    responder = rule_responder(bad=("Paris",), rewrite=lambda t: t.replace("Paris", "London"))
    calls: list[Call] = []
    lock = threading.Lock()

    def model(request: Request) -> Reply:
        messages = [{"role": m["role"], "content": m["content"]}
                    for m in request.body["messages"]]
        started = time.monotonic()
        answer = responder(messages)
        time.sleep(HOLD)
        with lock:
            calls.append(Call(kind_of(messages), started, time.monotonic()))
        return Reply(200, openai_chat(answer))

    with serve(model) as server:
        settings = Settings(request_timeout=30, entity_level=False,
                            max_concurrency=concurrency, judge_reasoning=reasoning)
        backend = get_backend(f"vllm:{server.url}/v1#m", settings)
        result = Checker(settings, backend=backend).check(SOURCE, RESPONSE)
    return calls, result


@pytest.mark.integration
def test_check_rewrite_and_judge_make_three_calls_the_judge_none():
    calls, result = _check(concurrency=8)
    assert [c.kind for c in calls] == ["nli", "mitigate", "nli"]  # detect, rewrite, verify
    assert result.refined_text == RESPONSE.replace("Paris", "London")
    assert result.judge_raw.reasoning_by == result.judge_refined.reasoning_by == "findings.v1"
    assert "Ada Lovelace lived in Paris." in result.judge_raw.reasoning  # named, not asked
    assert result.judge_refined.score == 5.0
    assert in_a_row(calls) == 3


@pytest.mark.integration
def test_one_call_at_a_time_makes_three_in_a_row_not_four():
    calls, result = _check(concurrency=1)
    assert len(calls) == 3 and in_a_row(calls) == 3
    assert result.judge_raw.reasoning_status == "checked"


@pytest.mark.integration
def test_the_models_reasoning_runs_beside_the_rewrite():
    calls, result = _check(concurrency=8, reasoning="model")
    assert [c.kind for c in calls].count("nli") == 2  # detection, and the rewrite's check
    assert {c.kind for c in calls} == {"nli", "mitigate", "reasoning"}
    assert result.refined_text == RESPONSE.replace("Paris", "London")
    assert result.judge_raw.reasoning_status == "checked"
    assert result.judge_raw.reasoning_by == "judge_grounded.v1"
    assert result.judge_refined.score == 5.0
    rewrite = next(c for c in calls if c.kind == "mitigate")
    reasoning = next(c for c in calls if c.kind == "reasoning")
    assert reasoning.start < rewrite.end and rewrite.start < reasoning.end  # they overlap
    assert in_a_row(calls) == 3  # detect, rewrite || reasoning, verify


@pytest.mark.integration
def test_the_models_reasoning_one_call_at_a_time_makes_four_in_a_row():
    calls, result = _check(concurrency=1, reasoning="model")
    assert len(calls) == 4 and in_a_row(calls) == 4
    assert result.judge_raw.reasoning_status == "checked"


@pytest.mark.parametrize(("spans", "expected"), [
    ([(0, 1), (1, 2), (2, 3)], 3), ([(0, 1), (0.5, 1.5), (2, 3)], 2), ([], 0)])
def test_in_a_row_counts_the_longest_chain(spans, expected):
    assert in_a_row([Call("x", a, b) for a, b in spans]) == expected


def test_the_graph_draws_the_raw_judge_beside_the_rewrite():
    from conli.graph.build import build_graph

    edges = {(e.source, e.target) for e in build_graph(["sentence_nli"]).get_graph().edges}
    assert {("coverage", "mitigate"), ("coverage", "raw_judge"), ("raw_judge", "__end__")} \
        <= edges
