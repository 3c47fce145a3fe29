"""conli as one node of a host LangGraph app: ``app.add_node("conli", check_node(checker))``.

The node is a front door like the CLI or the service: it runs ``Checker.check``, so the
texts are validated before any model call (an empty source is refused, not checked), the
check runs within ``check_deadline_seconds``, and the response-level ``verdict`` comes back
with the sentences and the rewrite. The checker's dependencies are bound here, so the host
keeps its own ``context_schema``; the compiled CoNLI graph still runs as a subgraph (its
steps appear in ``stream(..., subgraphs=True)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from conli.graph.state import CheckInput, NodeOutput
from conli.models import CheckResult

if TYPE_CHECKING:
    from conli.config import Settings
    from conli.pipeline import Checker


class CheckNode(Protocol):
    """A LangGraph node: reads the host's state, returns the keys conli writes."""

    def __call__(self, state: CheckInput) -> NodeOutput:
        """Check ``state``'s response against its source."""
        ...


def check_node(checker: Checker, *, settings: Settings | None = None) -> CheckNode:
    """A node that checks the state's ``response`` against its ``source``.

    It reads ``source``, ``response`` and, if present, ``question`` and ``points``; bad
    input raises ``InputError`` before any model call, a backend that cannot be used
    raises ``BackendError``, and a check past its deadline raises ``DeadlineExceededError``.
    ``settings`` overrides the checker's for this node (e.g. detect only), as in ``check``.
    """

    def conli(state: CheckInput) -> NodeOutput:
        result = checker.check(
            state.get("source"),  # type: ignore[arg-type]  # validated in check
            state.get("response"),  # type: ignore[arg-type]
            question=state.get("question"),
            points=state.get("points"),
            settings=settings,
        )
        return node_output(result)

    return conli


def node_output(result: CheckResult) -> NodeOutput:
    """The state keys the node writes, from the front doors' result."""
    return NodeOutput(
        verdict=result.verdict,
        support_score=result.support_score,
        sentences=result.sentences,
        refined_text=result.refined_text,
        mitigation=result.mitigation,
        judge_raw=result.judge_raw,
        judge_refined=result.judge_refined,
        coverage=result.coverage,
        word_scores=result.word_scores,
        check_result=result,
    )
