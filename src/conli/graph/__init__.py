"""The CoNLI pipeline as a LangGraph state machine."""

import sys
import warnings
from typing import Any

from conli.graph.build import build_graph
from conli.graph.deps import Deps
from conli.graph.state import NodeOutput

__all__ = ["Deps", "NodeOutput", "build_graph"]


def __getattr__(name: str) -> Any:
    """``conli.graph.check_node``, deprecated: the node lives in ``conli.hook``.

    Still works, with a ``DeprecationWarning``. It is read off the package root's public
    name (``conli.check_node``, loaded on first use), never imported from here: the graph
    sits below the checker the node runs and names nothing above it.
    """
    if name == "check_node":
        warnings.warn("conli.graph.check_node is deprecated: use conli.check_node "
                      "(conli.hook.check_node)", DeprecationWarning, stacklevel=2)
        return sys.modules["conli"].check_node
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
