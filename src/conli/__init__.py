"""conli: find and rewrite the sentences of an LLM answer that its source does not support.

Chain of NLI detection and mitigation, plus a 1-5 judge of the result. The names below are
loaded on first use (PEP 562), so ``conli --version`` and a subcommand's help do not pay
for LangGraph and the pipeline; ``from conli import Checker`` works as it always did.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from conli.version import __version__ as __version__

if TYPE_CHECKING:
    from conli.chat.middleware import check_middleware
    from conli.config import Settings
    from conli.generation import generate_answer as generate
    from conli.hook import acheck, acheck_many, astream_check, check_node
    from conli.models import CheckResult, PairResult
    from conli.pipeline import Checker, check, score

# public name -> (module, attribute)
_LAZY: dict[str, tuple[str, str]] = {
    "Settings": ("conli.config", "Settings"),
    "generate": ("conli.generation", "generate_answer"),
    "acheck": ("conli.hook", "acheck"),
    "acheck_many": ("conli.hook", "acheck_many"),
    "check_middleware": ("conli.chat.middleware", "check_middleware"),
    "astream_check": ("conli.hook", "astream_check"),
    "check_node": ("conli.hook", "check_node"),
    "CheckResult": ("conli.models", "CheckResult"),
    "PairResult": ("conli.models", "PairResult"),
    "Checker": ("conli.pipeline", "Checker"),
    "check": ("conli.pipeline", "check"),
    "score": ("conli.pipeline", "score"),
}

__all__ = ["CheckResult", "Checker", "PairResult", "Settings", "acheck", "acheck_many",
           "astream_check", "check", "check_middleware", "check_node", "generate", "score"]


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use, and keep the name here."""
    if name not in _LAZY:
        raise AttributeError(f"module 'conli' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
