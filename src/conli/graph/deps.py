"""What the nodes need that is not state: the model, the NER, spaCy, detectors, settings.

Passed per run as LangGraph's runtime context, so one compiled graph serves any backend.
``settings`` are resolved (``nli_prompt`` is a concrete version, never ``auto``). A host
app embeds conli with ``conli.graph.check_node``, which binds these itself, so the host's
own runtime context is never mistaken for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.runtime import Runtime

from conli.backends.base import Backend
from conli.calibration import Applied
from conli.config import Settings
from conli.detectors.base import Detector
from conli.errors import ConfigError
from conli.ner import EntityRecognizer


@dataclass(frozen=True)
class Deps:
    """Run dependencies of the graph."""

    backend: Backend
    ner: EntityRecognizer
    nlp: Any  # spaCy Language, for sentence boundaries
    settings: Settings
    detectors: Mapping[str, Detector]
    calibration: Applied | None = None  # the user's fitted decision (conli calibrate)


def deps_of(runtime: Runtime[Any]) -> Deps:
    """The run's ``Deps``; a clear error when the graph was run with another context.

    That happens when a host app adds the compiled graph itself as a node and has its own
    ``context_schema``: LangGraph hands the subgraph the host's context.
    """
    context = runtime.context
    if not isinstance(context, Deps):
        raise ConfigError(
            f"conli's graph was run with a {type(context).__name__} context, not its Deps; "
            "in a LangGraph app add conli.graph.check_node(checker) as the node instead"
        )
    return context
