"""The CoNLI pipeline as a LangGraph state machine.

LangGraph (a second to import) is loaded when a graph is built: ``build_graph`` is read
from ``graph.build`` on first use, so importing the package, or the checker, does not.
"""

import importlib
import sys
import warnings
from typing import TYPE_CHECKING, Any

from conli.graph.deps import Deps
from conli.graph.state import NodeOutput

if TYPE_CHECKING:
    from conli.graph.build import build_graph

__all__ = ["Deps", "NodeOutput", "build_graph"]


def __getattr__(name: str) -> Any:
    """``build_graph`` on first use; ``conli.graph.check_node``, deprecated.

    ``check_node`` still works, with a ``DeprecationWarning``: the node lives in
    ``conli.hook``. It is read off the package root's public name (``conli.check_node``,
    loaded on first use), never imported from here: the graph sits below the checker the
    node runs and names nothing above it.
    """
    if name == "build_graph":
        return importlib.import_module("conli.graph.build").build_graph
    if name == "check_node":
        warnings.warn("conli.graph.check_node is deprecated: use conli.check_node "
                      "(conli.hook.check_node)", DeprecationWarning, stacklevel=2)
        return sys.modules["conli"].check_node
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
