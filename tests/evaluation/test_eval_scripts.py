"""benchmarks/ holds configs, data and results; its scripts are experiments, each answering --help.

What runs is the installed package (``conli eval run CONFIG``); a script of its own is a
one-off experiment in ``benchmarks/experiments/issue-NN-<what>/`` beside a README that says
what it measured. None imports the tests (a benchmark does not rest on test doubles), and
every one imports and answers ``--help`` (a script that rots fails here).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

BENCH = ROOT / "benchmarks"
SCRIPTS = sorted(BENCH.rglob("*.py"))
MOST_EXPERIMENTS = 8


def test_benchmarks_holds_no_script_of_its_own_and_few_experiments() -> None:
    assert sorted(BENCH.glob("*.py")) == []
    folders = sorted(p for p in (BENCH / "experiments").iterdir() if p.is_dir())
    assert 0 < len(folders) <= MOST_EXPERIMENTS
    assert all(p.name.startswith("issue-") and (p / "README.md").is_file() for p in folders)
    assert {p.parent for p in SCRIPTS} <= set(folders)  # every script is an experiment's
    assert len(SCRIPTS) >= 10


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    found |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_imports_the_tests(script: Path) -> None:
    assert {m for m in _imports(script) if m == "tests" or m.startswith("tests.")} == set()
    assert "sys.path" not in script.read_text(encoding="utf-8")


@pytest.mark.integration
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_script_answers_help(script: Path) -> None:
    """Run as documented (``python benchmarks/experiments/.../NAME.py``), this checkout first."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, str(script), "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
