"""The CoNLI pipeline as a LangGraph state machine."""

from conli.graph.build import build_graph
from conli.graph.deps import Deps

__all__ = ["Deps", "build_graph"]
