"""Wire the CoNLI steps into a LangGraph state machine, as in the paper's Figure 1.

split -> select -> detector ... detector -> ground -> merge -> coverage
-> [mitigate (|| raw_judge) | keep]
-> [fix_coverage] -> [judge]

The default detectors are the paper's two levels: sentence_nli -> entity_nli.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from functools import wraps
from typing import Any, Literal, get_args

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from conli.graph import grounding, nodes
from conli.graph.deps import Deps, deps_of
from conli.graph.state import CheckInput, CheckOutput, CheckState
from conli.run.context import report

Edit = Literal["mitigate", "keep", "raw_judge"]


def route_to_edit(state: CheckState, runtime: Runtime[Deps]) -> list[Edit]:
    """Mitigate only when something was flagged and rewriting is on (after coverage).

    Beside the rewrite, on a backend that runs calls at once, the raw response is judged:
    its judge needs only detection's findings, so a hosted model makes three calls in a
    row (detect, rewrite beside the raw judge's reasoning, verify), not four.
    """
    deps = deps_of(runtime)
    settings = deps.settings
    if not (settings.mitigate and any(s.verdict == "hallucinated" for s in state["sentences"])):
        return ["keep"]
    if settings.judge and settings.judge_raw and deps.backend.capabilities.max_concurrency > 1:
        return ["mitigate", "raw_judge"]
    return ["mitigate"]


def route_after_edit(
    state: CheckState, runtime: Runtime[Deps]
) -> Literal["fix_coverage", "judge", "__end__"]:
    """Fix coverage when asked and a point is uncovered; then the judge, unless off."""
    coverage = state.get("coverage")
    if deps_of(runtime).settings.fix_coverage and coverage is not None and any(
            p.verdict == "uncovered" for p in coverage.points):
        return "fix_coverage"
    return route_to_judge(state, runtime)


def route_to_judge(state: CheckState, runtime: Runtime[Deps]) -> Literal["judge", "__end__"]:
    """The rubric judge runs unless turned off."""
    return "judge" if deps_of(runtime).settings.judge else "__end__"


def _timed(name: str, node: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """Add the node's wall time to ``timings``, and report its start, without touching it."""

    @wraps(node)
    def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        report(name, 0, 0)
        started = time.perf_counter()
        update = node(*args, **kwargs)
        return {**update, "timings": {name: time.perf_counter() - started}}

    return run


def build_graph(
    detectors: Sequence[str],
) -> CompiledStateGraph[CheckState, Deps, CheckInput, CheckOutput]:
    """Compile the pipeline with ``detectors`` in order; run it with ``context=Deps(...)``.

    Each detector is one node named after it; every run's ``Deps.detectors`` must hold
    them (``detectors.build``).
    """
    graph = StateGraph(
        CheckState, context_schema=Deps, input_schema=CheckInput, output_schema=CheckOutput
    )
    steps: list[tuple[str, Callable[..., dict[str, Any]]]] = [
        ("split", nodes.split),
        ("select", nodes.select),
        *((name, nodes.detect(name)) for name in detectors),
        ("ground", grounding.ground),
        ("merge", nodes.merge),
        ("coverage", nodes.coverage),
        ("mitigate", nodes.mitigate),
        ("keep", nodes.keep),
        ("fix_coverage", nodes.fix_coverage),
        ("raw_judge", nodes.raw_judge),
        ("judge", nodes.judge),
    ]
    for name, node in steps:
        graph.add_node(name, _timed(name, node))
    chain = ["split", "select", *detectors, "ground", "merge", "coverage"]
    graph.add_edge(START, chain[0])
    for before, after in itertools.pairwise(chain):
        graph.add_edge(before, after)
    graph.add_conditional_edges("coverage", route_to_edit, list(get_args(Edit)))
    graph.add_edge("raw_judge", END)  # the branch beside the rewrite ends; judge reads it
    graph.add_conditional_edges("mitigate", route_after_edit)
    graph.add_conditional_edges("keep", route_after_edit)
    graph.add_conditional_edges("fix_coverage", route_to_judge)
    graph.add_edge("judge", END)
    return graph.compile()
