"""conli: find and rewrite the sentences of an LLM answer that its source does not support.

Chain of NLI detection and mitigation, plus a 1-5 judge of the result.
"""

from conli.config import Settings
from conli.generation import generate_answer as generate
from conli.hook import acheck, astream_check, check_node
from conli.models import CheckResult, PairResult
from conli.pipeline import Checker, check, score
from conli.version import __version__ as __version__

__all__ = ["CheckResult", "Checker", "PairResult", "Settings", "acheck", "astream_check",
           "check", "check_node", "generate", "score"]
