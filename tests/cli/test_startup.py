"""A start loads nothing the command does not use (issue 64.4).

``import conli; conli.Checker`` and ``conli check --help`` load no NLTK (its ``__init__``
pulls SciPy, scikit-learn and pandas), no LangGraph (loaded when a graph is built) and no
model library, each in a fresh interpreter. How long a start takes is a benchmark's figure
(``benchmarks/experiments/issue-64-start-up/bench_startup.py``), never a test's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.integration

HEAVY = ("nltk", "langgraph", "langchain_core", "langsmith", "scipy", "pandas", "sklearn",
         "spacy", "xllamacpp", "numpy")
REPORT = ("import json, sys\n"
          "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:]))))")


def _loaded_after(code: str) -> list[str]:
    """The HEAVY packages in ``sys.modules`` once ``code`` ran in a fresh interpreter."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONLI_")}
    environment["PYTHONPATH"] = str(ROOT / "src")  # this checkout's conli
    done = subprocess.run([sys.executable, "-c", f"{code}\n{REPORT}", *HEAVY], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=True)
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "import conli\nconli.Checker",
    "from conli import Checker, Settings, check, score",
    "from conli.cli.app import parser_for\nparser_for(['check', '--help'])",
])
def test_a_start_loads_no_stemmer_graph_statistics_or_model_library(code: str) -> None:
    assert _loaded_after(code) == []


def test_building_a_graph_loads_langgraph() -> None:  # the probe sees what is loaded
    assert "langgraph" in _loaded_after(
        "from conli.graph import build_graph\nbuild_graph(['sentence_nli'])")
