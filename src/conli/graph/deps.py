"""What the nodes need that is not state: the model, the NER, spaCy, detectors, settings.

``Deps`` (defined with the detectors, in ``detectors.base``, since they are handed it too)
is passed per run as LangGraph's runtime context, so one compiled graph serves any backend.
A host app embeds conli with ``conli.check_node``, which binds these itself, so the
host's own runtime context is never mistaken for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from conli.detectors.base import Deps as Deps  # the graph's runtime context, re-exported
from conli.errors import ConfigError

if TYPE_CHECKING:  # LangGraph is loaded when a graph is built (graph.build), not before
    from langgraph.runtime import Runtime


def deps_of(runtime: Runtime[Any]) -> Deps:
    """The run's ``Deps``; a clear error when the graph was run with another context.

    That happens when a host app adds the compiled graph itself as a node and has its own
    ``context_schema``: LangGraph hands the subgraph the host's context.
    """
    context = runtime.context
    if not isinstance(context, Deps):
        raise ConfigError(
            f"conli's graph was run with a {type(context).__name__} context, not its Deps; "
            "in a LangGraph app add conli.check_node(checker) as the node instead"
        )
    return context
