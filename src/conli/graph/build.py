"""Wire the CoNLI steps into a LangGraph state machine, as in the paper's Figure 1.

split -> select -> sentence_nli -> [entity_nli] -> merge -> [mitigate | keep] -> [judge]
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import wraps
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from conli.graph import nodes
from conli.graph.deps import Deps
from conli.graph.state import CheckInput, CheckOutput, CheckState
from conli.run_context import report


def route_after_sentences(
    state: CheckState, runtime: Runtime[Deps]
) -> Literal["entity_nli", "merge"]:
    """Entity-level checks run only on sentences that passed the sentence level."""
    if not runtime.context.settings.entity_level:
        return "merge"
    passed = any(j.verdict == "supported" for j in state["sentence_judgements"].values())
    return "entity_nli" if passed else "merge"


def route_after_merge(state: CheckState, runtime: Runtime[Deps]) -> Literal["mitigate", "keep"]:
    """Mitigate only when something was flagged and rewriting is on."""
    flagged = any(s.verdict == "hallucinated" for s in state["sentences"])
    return "mitigate" if flagged and runtime.context.settings.mitigate else "keep"


def route_to_judge(state: CheckState, runtime: Runtime[Deps]) -> Literal["judge", "__end__"]:
    """The rubric judge runs unless turned off."""
    return "judge" if runtime.context.settings.judge else "__end__"


def _timed(name: str, node: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """Add the node's wall time to ``timings``, and report its start, without touching it."""

    @wraps(node)
    def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        report(name, 0, 0)
        started = time.perf_counter()
        update = node(*args, **kwargs)
        return {**update, "timings": {name: time.perf_counter() - started}}

    return run


def build_graph() -> CompiledStateGraph[CheckState, Deps, CheckInput, CheckOutput]:
    """Compile the pipeline; run it with ``graph.invoke(input, context=Deps(...))``."""
    graph = StateGraph(
        CheckState, context_schema=Deps, input_schema=CheckInput, output_schema=CheckOutput
    )
    for name in (
        "split",
        "select",
        "sentence_nli",
        "entity_nli",
        "merge",
        "mitigate",
        "keep",
        "judge",
    ):
        graph.add_node(name, _timed(name, getattr(nodes, name)))
    graph.add_edge(START, "split")
    graph.add_edge("split", "select")
    graph.add_edge("select", "sentence_nli")
    graph.add_conditional_edges("sentence_nli", route_after_sentences)
    graph.add_edge("entity_nli", "merge")
    graph.add_conditional_edges("merge", route_after_merge)
    graph.add_conditional_edges("mitigate", route_to_judge)
    graph.add_conditional_edges("keep", route_to_judge)
    graph.add_edge("judge", END)
    return graph.compile()
