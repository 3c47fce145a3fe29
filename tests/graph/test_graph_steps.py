"""Coverage and word scores are a graph step of their own, after merge (issue 31)."""

from __future__ import annotations

from typing import Any

from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.graph import build_graph
from conli.pipeline import Checker
from tests.support.responders import rule_responder

SOURCE = "The bridge opened in 1998. It is 240 metres long."
RESPONSE = "The bridge opened in 1998. It is 420 metres long."
POINTS = {"facts": ["The bridge is 240 metres long."]}


def _edges(detectors: list[str]) -> set[tuple[str, str]]:
    """The compiled graph's edges, as (from, to) node names."""
    drawn = build_graph(detectors).get_graph()
    return {(edge.source, edge.target) for edge in drawn.edges}


def test_coverage_is_the_node_after_merge_and_routes_to_the_edit() -> None:
    edges = _edges(["sentence_nli", "entity_nli"])
    assert ("entity_nli", "ground") in edges and ("ground", "merge") in edges
    assert ("merge", "coverage") in edges
    assert {("coverage", "mitigate"), ("coverage", "keep")} <= edges
    assert not {target for source, target in edges if source == "merge"} - {"coverage"}


def test_merge_writes_the_verdicts_and_coverage_the_block_and_word_scores(
        settings: Settings) -> None:
    checker = Checker(settings, backend=ScriptedBackend(responder=rule_responder(bad=("420",))))
    ready = checker.prepare()
    inputs = {"source": SOURCE, "response": RESPONSE, "question": None, "points": POINTS}
    updates: dict[str, dict[str, Any]] = {}
    for step in ready.graph.stream(inputs, context=ready.deps, stream_mode="updates"):
        updates.update(step)
    assert set(updates["merge"]) == {"sentences", "timings"}
    assert set(updates["coverage"]) == {"coverage", "word_scores", "timings"}
    assert updates["coverage"]["coverage"] is not None and updates["coverage"]["word_scores"]


def test_a_checks_timings_name_the_coverage_step(settings: Settings) -> None:
    checker = Checker(settings, backend=ScriptedBackend(responder=rule_responder(bad=("420",))))
    result = checker.check(SOURCE, RESPONSE, points=POINTS)
    assert {"merge", "coverage"} <= set(result.timings)
    assert result.coverage is not None and result.word_scores
