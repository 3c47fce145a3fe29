"""The package's shape, as figures anyone can rerun: modules at the root, lines per module,
import circles (lazy and type-only imports counted). Ceilings only move down (issue 53's
targets: at most 16 modules at the root, none over 450 lines, no circle). And the tests'
own shape (issue 63): each in its area's folder, none importing another test file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

from tests.support.paths import ROOT, TESTS

PACKAGE = ROOT / "src" / "conli"
# a ceiling: src/conli/*.py, __init__.py included (models, run and judges are packages)
ROOT_MODULES = 14
MAX_LINES = 450
OVER: dict[str, int] = {}  # modules allowed over MAX_LINES: none


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_package_root_holds_no_more_modules_than_it_did() -> None:
    assert len(list(PACKAGE.glob("*.py"))) <= ROOT_MODULES


def test_no_module_is_longer_than_the_house_allows() -> None:
    long = {str(p.relative_to(PACKAGE)): _lines(p) for p in PACKAGE.rglob("*.py")
            if _lines(p) > MAX_LINES}
    assert set(long) <= set(OVER), f"over {MAX_LINES} lines: {long}"
    assert all(long[name] <= OVER[name] for name in long), long


def test_no_import_circle_counting_lazy_and_type_only_imports() -> None:
    """Strongly connected modules of grimp's graph (every import statement, at any depth)."""
    graph = grimp.build_graph("conli", exclude_type_checking_imports=False, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in graph.find_modules_directly_imported_by(module):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = [stack.pop()]
            while component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    assert circles == []


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (lazy imports too), ``from``'s names as
    modules of their own (``from tests import test_x`` imports ``tests.test_x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_no_test_file_imports_another_test_file_or_a_conftest() -> None:
    """Helpers are shared through tests/support, fixtures through a folder's conftest.py."""
    crossed = {
        str(path.relative_to(TESTS)): sorted(
            m for m in _imported(path)
            if any(part.startswith("test_") or part == "conftest" for part in m.split(".")))
        for path in sorted(TESTS.rglob("*.py"))}
    assert {name: modules for name, modules in crossed.items() if modules} == {}


def test_the_tests_live_in_their_areas_folders() -> None:
    """tests/ holds folders by area (packages, so two areas may hold files of one name)."""
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []
    assert sorted(p.name for p in (TESTS / "support").glob("test_*.py")) == []
    areas = [p for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py"))]
    assert len(areas) >= 10
    assert [p.name for p in areas if not (p / "__init__.py").is_file()] == []
