"""conli: find the sentences of an LLM answer its source does not support, say why,
rewrite only those, and score the result (Chain of NLI, with a 1-5 rubric judge)."""

from conli.config import Settings
from conli.models import CheckResult
from conli.pipeline import Checker, check

__all__ = ["CheckResult", "Checker", "Settings", "check"]
__version__ = "0.1.0"
