"""The CoNLI pipeline as a LangGraph state machine, and as a node for a host app."""

from conli.graph.build import build_graph
from conli.graph.deps import Deps
from conli.graph.embed import check_node
from conli.graph.state import NodeOutput

__all__ = ["Deps", "NodeOutput", "build_graph", "check_node"]
