"""The README is the front page and the reference lives in docs/ pages (issue 53).

Whatever page an example or a table moved to, it is held to the code: every relative link
(and its anchor) resolves, every Python example compiles and names only what conli has,
every ``conli`` command shown parses with conli's own parser, and the exit-code and gate
tables agree with ``conli.errors`` and the gate tests. The README stays a front page:
short, with the set-up and test commands a fresh machine and CI rely on.
"""

from __future__ import annotations

import ast
import importlib
import re
import shlex
from pathlib import Path

import pytest

from conli.cli.app import parser_for
from conli.errors import (
    EXIT_GATE_FAILED,
    EXIT_INTERRUPTED,
    BackendError,
    BackendUnavailableError,
    Boundary,
    ConfigError,
    DeadlineExceededError,
    InputError,
    InputTooLargeError,
    error_classes,
)
from tests.support.docs import FENCE, PAGES
from tests.support.gate_table import GATE_TABLE
from tests.support.paths import ROOT

IDS = [str(p.relative_to(ROOT)) for p in PAGES]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def _prose(text: str) -> str:
    """The page without its fenced blocks (a ``# comment`` in a block is no heading)."""
    return FENCE.sub("", text)


def _blocks(language: str) -> list[tuple[str, str]]:
    """Every fenced block of ``language`` on every page, with the page it is on."""
    return [(str(page.relative_to(ROOT)), match.group(2)) for page in PAGES
            for match in FENCE.finditer(_text(page)) if match.group(1) == language]


def _slugs(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings (lower case, punctuation dropped)."""
    seen: dict[str, int] = {}
    slugs = set()
    for heading in re.findall(r"^#{1,6} (.+)$", _prose(text), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        slugs.add(slug if not count else f"{slug}-{count}")
    return slugs


def _relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(_prose(_text(page)))
            if not re.match(r"[a-z][a-z+.-]*:", target)]  # http:, https:, mailto:


def test_the_readme_is_a_front_page_that_links_each_docs_page() -> None:
    readme = _text(ROOT / "README.md")
    assert len(readme.splitlines()) <= 260
    linked = {target.split("#")[0] for target in _relative_links(ROOT / "README.md")}
    for name in ("library", "cli", "service", "langgraph", "report", "results", "design",
                 "configuration", "settings", "benchmarks", "runtime"):
        assert f"docs/{name}.md" in linked
        assert (ROOT / "docs" / f"{name}.md").is_file()


def test_the_readme_keeps_the_commands_a_fresh_machine_and_ci_run() -> None:
    """The two set-up commands (the Makefile's ``demo`` and ``test``), and ``.ci/run``'s."""
    readme = _text(ROOT / "README.md")
    assert ("make demo   # creates .venv, installs conli + the embedded model, checks "
            "examples/\n") in readme
    assert ("make test   # installs every extra, then ruff, mypy and all tests (real embedded "
            "model included)\n") in readme
    assert "`.ci/run` runs `make test`" in readme
    assert re.search(r"^make test$", _text(ROOT / ".ci" / "run"), re.MULTILINE)
    makefile = _text(ROOT / "Makefile")
    assert re.search(r"^demo: ", makefile, re.MULTILINE)
    assert re.search(r"^test: ", makefile, re.MULTILINE)


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in _relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        gone = not file.exists()
        if gone or (anchor and file.suffix == ".md" and anchor not in _slugs(_text(file))):
            broken.append(target)
    assert broken == []


def test_the_link_check_can_fail() -> None:
    assert "the-result-object---json" in _slugs(_text(ROOT / "docs" / "results.md"))
    assert "no-such-heading" not in _slugs(_text(ROOT / "docs" / "results.md"))
    assert "vllm-prefix-caching-lets-every-claim-reuse-the-documents-prefill" not in _slugs(
        _text(ROOT / "docs" / "configuration.md"))  # a comment in a code block


@pytest.mark.parametrize(("page", "code"), _blocks("python"))
def test_every_python_example_compiles_and_names_what_conli_has(page: str, code: str) -> None:
    tree = compile(code, page, "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    missing = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("conli"):
            module = importlib.import_module(node.module or "")
            missing += [f"{node.module}.{a.name}" for a in node.names
                        if not hasattr(module, a.name)]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("conli"):
                    importlib.import_module(alias.name)
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "conli"
              and not hasattr(importlib.import_module("conli"), node.attr)):
            missing.append(f"conli.{node.attr}")
    assert missing == []


def _commands() -> list[tuple[str, list[str]]]:
    """Each ``conli ...`` command of a shell block: its arguments, shell syntax removed."""
    found = []
    for page, code in _blocks("sh"):
        for line in code.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            segment: list[str] = []
            for word in [*words, "|"]:
                if word not in ("|", "&&", ";", "<", ">"):
                    segment.append(word)
                    continue
                while segment and re.match(r"[A-Z_]+=", segment[0]):  # VAR=value conli ...
                    segment.pop(0)
                if segment and segment[0].endswith("conli") and "..." not in segment:
                    found.append((page, segment[1:]))
                segment = [] if word != "<" and word != ">" else ["<redirect>"]
    return found


COMMANDS = _commands()


def test_the_docs_show_every_command_and_many_examples() -> None:
    shown = {args[0] for _page, args in COMMANDS}
    assert shown >= {"check", "judge", "batch", "serve", "report", "eval", "bench",
                     "generate", "calibrate"}
    assert len(COMMANDS) >= 30


@pytest.mark.parametrize(("page", "args"), COMMANDS,
                         ids=[f"{page}:{' '.join(args)[:60]}" for page, args in COMMANDS])
def test_every_command_shown_parses(page: str, args: list[str]) -> None:
    try:
        parser_for(args).parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"{page}: `conli {' '.join(args)}` does not parse (exit {exc.code})")


def _table(page: str, heading: str, header: str) -> list[list[str]]:
    """The rows of the table whose header row starts with ``header``, under ``heading``."""
    text = _text(ROOT / page).split(f"\n{heading}\n", 1)[1]
    rows = text.split(header, 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def _answer(error: type[BaseException]) -> Boundary:
    return next(answer for kind, answer in error_classes() if issubclass(error, kind))


def _codes(cell: str) -> set[int]:
    return {int(n) for n in re.findall(r"(?<![\w.-])(\d{1,3})(?![\w.])", cell)}


def test_the_exit_code_table_is_the_boundary_table() -> None:
    rows = _table("docs/cli.md", "## Exit codes and HTTP statuses", "| what happened |")
    by_row = {row[0].split(":")[0].split(" (")[0]: row for row in rows}
    expected: dict[str, tuple[set[int], set[int]]] = {
        "bad input": ({_answer(InputError).exit_code, _answer(InputTooLargeError).exit_code},
                      {_answer(InputError).http_status,
                       _answer(InputTooLargeError).http_status}),
        "bad settings or an unwritable output path": (
            {_answer(ConfigError).exit_code}, {_answer(ConfigError).http_status}),
        "the backend could not be used": (
            {_answer(BackendError).exit_code, _answer(BackendUnavailableError).exit_code},
            {_answer(BackendError).http_status, _answer(BackendUnavailableError).http_status}),
        "the check ran past `CONLI_CHECK_DEADLINE_SECONDS`": (
            {_answer(DeadlineExceededError).exit_code},
            {_answer(DeadlineExceededError).http_status}),
    }
    for what, (exits, statuses) in expected.items():
        _what, check, _batch, serve = by_row[what]
        assert _codes(check) == exits, what
        assert _codes(serve) == statuses, what
    assert _codes(by_row["interrupted"][1]) == {EXIT_INTERRUPTED}
    assert _codes(by_row["`--fail-on hallucinated`"][1]) == {EXIT_GATE_FAILED}


def test_the_gate_table_is_the_one_the_gate_tests_run() -> None:
    rows = _table("docs/cli.md", "## Thresholds and CI gates", "| verdict | threshold |")
    columns = {"none": 3, "hallucinated": 4, "unverified": 5}
    for verdict, threshold, fail_on, passed, code in GATE_TABLE:
        row = next(r for r in rows if r[0] == verdict
                   and threshold in re.split(r", | or ", r[1]))
        assert row[2] == ("yes" if passed else "no"), (verdict, threshold)
        assert row[columns[fail_on]] == str(code), (verdict, threshold, fail_on)
