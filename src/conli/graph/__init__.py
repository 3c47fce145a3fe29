"""The CoNLI pipeline as a LangGraph state machine."""

from typing import Any

from conli.graph.build import build_graph
from conli.graph.deps import Deps
from conli.graph.state import NodeOutput

__all__ = ["Deps", "NodeOutput", "build_graph"]


def __getattr__(name: str) -> Any:
    """``conli.graph.check_node``, the node's old home: it now lives in ``conli.hook``.

    Kept so that code written against the old path still runs; resolved on first use
    only (importlib, not an import statement: the graph sits below the checker the node
    runs, and loading the graph must not load the checker).
    """
    if name == "check_node":
        import importlib

        return importlib.import_module("conli.hook").check_node
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
