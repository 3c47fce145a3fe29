"""The docs' code blocks run as written (issue 65, item 7), on a scripted model over loopback.

tests/house/test_docs_pages.py compiles every Python block and parses every ``conli`` command;
here they run. A loopback server speaks OpenAI's chat completions and answers every conli
prompt by rule (a claim holding "1963" is unsupported), the real ``openai`` SDK talks to it
(``CONLI_LLM=openai:...`` and ``OPENAI_BASE_URL``, as a reader's environment would), and the
embedded model is never loaded.

- Python: each page's blocks run in order in one namespace, as a reader goes down the page,
  each compiled as a script (a top-level ``async for`` is a SyntaxError, as it is for the
  reader). What a block leaves to the reader (``source``, ``draft``, their retriever and
  chat model) is ``READER``'s, per page.
- Shell: each block of ``SESSIONS`` runs whole in ``bash -e`` in a folder holding
  ``examples/`` and the reader's files, ``conli`` being this checkout's; a line with
  `` ... `` elides flags and is left out. Every other shell block outside benchmarks.md is
  in ``NOT_RUN`` with the reason, so a new block must be placed in one or the other.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from tests.support.docs import FENCE, PAGES
from tests.support.http_fakes import FakeServer, Reply, Request, openai_chat, serve
from tests.support.paths import ROOT
from tests.support.responders import rule_responder

BAD = ("1963", "FALSE")
SOURCE = "The library opened in 1962. The city council runs it."
DRAFT = "The library opened in 1963."


class Provider:
    """OpenAI's chat completions, answered by rule; ``/models`` lists one model."""

    def __init__(self) -> None:
        self.model = rule_responder(bad=BAD)

    def __call__(self, request: Request) -> Reply:
        if request.path.endswith("/models"):
            return Reply(200, {"object": "list", "data": [{"id": "served", "object": "model"}]})
        messages = request.body["messages"]
        if messages[-1]["content"] in APP_QUESTIONS:  # an app's chat, through the proxy
            return Reply(200, openai_chat(DRAFT))
        return Reply(200, openai_chat(self.model(messages)))


APP_QUESTIONS = ("When did the library open?", "When did it open?")  # docs/proxy.md's


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeServer]:
    with serve(Provider()) as server:
        yield server


def _environment(server: FakeServer, cache: Path) -> dict[str, str]:
    return {"CONLI_LLM": "openai:gpt-4o-mini", "OPENAI_BASE_URL": f"{server.url}/v1",
            "OPENAI_API_KEY": "sk-docs", "CONLI_CACHE_DIR": str(cache)}


def _blocks(language: str) -> list[tuple[str, str]]:
    """Every fenced block of ``language``: (page, code), in page order."""
    return [(str(page.relative_to(ROOT)), match.group(2)) for page in PAGES
            for match in FENCE.finditer(page.read_text(encoding="utf-8"))
            if match.group(1) == language]


# --- Python: each page in order, the reader's own names supplied --------------------------


class ScriptedChat(GenericFakeChatModel):
    """LangChain's fake chat model; it takes tools as a real one does."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


DOCS = [Document(page_content="The library opened in 1962.", id="doc-7"),
        Document(page_content="The city council runs it.", id="doc-9")]


class Retriever:
    def invoke(self, query: str) -> list[Document]:
        return DOCS


@tool(response_format="content_and_artifact")
def search_docs(query: str) -> tuple[str, list[Document]]:
    """Search the library's documents."""
    return "\n\n".join(d.page_content for d in DOCS), DOCS


class ChatState(TypedDict, total=False):
    question: str
    source: str
    response: str
    verdict: str
    mitigation: Any
    refined_text: str
    check_result: Any


@dataclass(frozen=True)
class AppContext:
    user: str


def answer(state: ChatState) -> dict[str, str]:
    return {"response": DRAFT}


async def chat_stream_text_chunks() -> AsyncIterator[str]:
    for piece in ("The library opened ", "in 1963. The city council", " runs it."):
        yield piece


def _reader(page: str, sent: list[str | None]) -> dict[str, Any]:
    """What a page's blocks leave to the reader: their texts, model, retriever and app."""
    common: dict[str, Any] = {"source": SOURCE, "draft": DRAFT, "question": "When?",
                              "send": sent.append, "decline": lambda: sent.append(None)}
    return {
        "README.md": common,
        "docs/library.md": {**common, "source_text": SOURCE, "response_text": DRAFT,
                            "pairs": [(SOURCE, DRAFT)], "s2": SOURCE,
                            "a2": "The city council runs it.",
                            "chat_stream_text_chunks": chat_stream_text_chunks},
        "docs/langgraph.md": {
            "retriever": Retriever(), "search_docs": search_docs, "ChatState": ChatState,
            "AppContext": AppContext, "answer": answer,
            "llm": ScriptedChat(messages=iter([
                AIMessage(DRAFT),  # the chat node's answer
                AIMessage("", tool_calls=[{"name": "search_docs", "args": {"query": "open"},
                                           "id": "call-1"}]),  # the agent asks its tool
                AIMessage("The library opened in 1962.")]))},  # and answers
    }.get(page, {})


PYTHON_PAGES = sorted({page for page, _ in _blocks("python")})


@pytest.mark.integration
@pytest.mark.parametrize("page", PYTHON_PAGES)
def test_each_pages_python_blocks_run_in_order(
        page: str, provider: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in _environment(provider, tmp_path / "cache").items():
        monkeypatch.setenv(name, value)
    sent: list[str | None] = []
    namespace: dict[str, Any] = {"__name__": "__docs__", **_reader(page, sent)}
    with ExitStack() as running:
        proxy = running.enter_context(_proxy()) if page == "docs/proxy.md" else None
        for number, (_, code) in enumerate(b for b in _blocks("python") if b[0] == page):
            if proxy is not None:  # the reader's conli serve --upstream, where it listens
                code = code.replace("http://127.0.0.1:8000", proxy)
            # dont_inherit: as the reader's script, without this module's __future__ imports
            exec(compile(code, f"{page}, block {number + 1}", "exec", dont_inherit=True),
                 namespace)
    shown = capsys.readouterr().out
    if page == "docs/proxy.md":  # each block printed the checked reply: 1963 never reached it
        assert "hallucinated" in shown and "1963" not in shown
    if page == "README.md":
        assert sent == [None]  # the flagged sentence was removed: nothing left, declined
    if page == "docs/library.md":
        assert "flag: The library opened in 1963." in shown  # the streamed check
        assert list(namespace["table"]["verdict"]) == ["hallucinated"]
        assert [r.verdict for r in namespace["results"]] == ["hallucinated"]
    if page == "docs/langgraph.md":
        checked = namespace["reply"].response_metadata["conli"]
        assert checked["verdict"] == "hallucinated"
        assert checked["source_names"] == ["doc-7", "doc-9"]
        assert namespace["state"]["conli"]["source_names"] == ["doc-7", "doc-9"]


def _proxy() -> Any:
    """docs/proxy.md's server: the service with the proxy before the provider, key change-me."""
    from conli.backends import get_backend
    from conli.config import Settings
    from conli.proxy.app import proxy_mount
    from tests.support.service import serving

    settings = Settings(service_api_keys=["change-me"],  # type: ignore[call-arg]
                        proxy_upstream="openai:gpt-4o-mini")
    return serving(settings, backend=get_backend(settings.llm, settings),
                   mount=proxy_mount(settings))


# --- shell: the blocks a reader can run on a laptop, in sessions ----------------------------

# Each session is a list of blocks (by their first line) run in turn in one folder.
SESSIONS: dict[str, list[str]] = {
    "README and report.md: check, batch, then audit": [
        "conli check --source examples/source.txt --response examples/response.txt",
        "printf '%s\\n' '{\"id\": \"a1\"",
        "conli batch in.jsonl audit.jsonl --mode judge --judge-mode both",
        "conli batch in.jsonl out.jsonl --mode rewrite --judge",  # resumes the README's
    ],
    "cli.md: judge, points, RAG, batch from a table and stdin": [
        "conli judge --source examples/source.txt",
        "cat examples/points.json",
        "conli check --source examples/rag/chunk1.txt",
        "printf '%s\\n' 'user_input,retrieved_contexts,response'",
    ],
}
# What a session leaves to the reader: their own files.
READER_FILES = {"article.txt": SOURCE, "answer.txt": DRAFT,
                "in.jsonl": json.dumps({"id": "a1", "source": SOURCE, "response": DRAFT})}
NOT_RUN: dict[str, str] = {
    "make demo": "installs a venv and runs the suite (CI runs it)",
    "pip install -e '.[local]'": "installs packages",
    "pip install -e '.[service]'": "installs the service and starts a server (test_service)",
    "make test    #": "the suite itself",
    "conli generate --source": "needs a backend that continues an answer (test_generation)",
    "conli check --source docs/facts.md": "a gate: its exit code is the point "
                                          "(test_gate_table runs every row)",
    "conli batch answers.jsonl": "a gate with JUnit (test_batch_ci)",
    "pip install -e '.[ray]'": "starts Ray (test_batch_ray runs a local Ray)",
    "# every node": "a Ray cluster and a vLLM server",
    "printf '%s\\n' '{\"source\"": "conli eval needs labelled data sets (test_eval_*)",
    "conli calibrate --file": "needs 20+ labelled examples (test_calibration)",
    "conli check --source s.txt --response r.txt --llm local": "every provider's key",
    "python3 -m venv .venv": "installs packages (test_hosted_quickstart runs the check)",
    "# vLLM (prefix caching": "a vLLM server and Ollama (test_checkers)",
    "python3 -m venv /tmp/v": "installs two llama.cpp bindings",
    "printf '%s\\n' '{\"source\": \"The library": "a running service (test_service_streams)",
    "conli diff last-night.jsonl": "needs two nights' OUT files (test_ci_outputs diffs two)",
    "conli batch in.jsonl out.jsonl --mode check      #": "a second run over the cache "
                                                         "(test_result_cache)",
    "conli report out.jsonl --marks": "needs two reviewers' marks (test_report_marks)",
    "# before: a worktree of c4c8e8c": "a start-up benchmark over two checkouts",
    "CONLI_SERVICE_API_KEYS='[\"change-me\"]' conli serve --upstream": "starts a server "
        "(test_proxy runs one; docs/proxy.md's Python is run against it)",
    "pip install -e '.[service,openai]'": "installs packages and starts a server (test_proxy)",
    "python benchmarks/experiments/issue-66-proxy/bench_proxy.py": "a benchmark "
                                                                   "(docs/benchmarks.md)",
}


def _first_line(code: str) -> str:
    return code.strip().splitlines()[0]


def _placed(code: str) -> list[str]:
    first = _first_line(code)
    return [key for key in [*(b for s in SESSIONS.values() for b in s), *NOT_RUN]
            if first.startswith(key)]


def test_every_shell_block_is_run_or_says_why_not() -> None:
    unplaced = [(page, _first_line(code)) for page, code in _blocks("sh")
                if page != "docs/benchmarks.md" and not _placed(code)]
    assert unplaced == []


def _shim(folder: Path) -> Path:
    """A ``conli`` on PATH that runs this checkout's."""
    folder.mkdir()
    shim = folder / "conli"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m conli.cli "$@"\n', "utf-8")
    shim.chmod(0o755)
    return folder


@pytest.mark.integration
@pytest.mark.parametrize("session", sorted(SESSIONS))
def test_each_shell_session_runs(session: str, provider: FakeServer, tmp_path: Path) -> None:
    work = tmp_path / "reader"
    shutil.copytree(ROOT / "examples", work / "examples")
    for name, text in READER_FILES.items():
        (work / name).write_text(text + "\n", "utf-8")
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("CONLI_", "OPENAI_"))}
    environment.update(_environment(provider, tmp_path / "cache"))
    environment.update({"PYTHONPATH": str(ROOT / "src"),
                        "PATH": f"{_shim(tmp_path / 'bin')}:{environment['PATH']}"})
    blocks = {_first_line(code): code for _, code in _blocks("sh")}
    for first in SESSIONS[session]:
        code = next(c for line, c in blocks.items() if line.startswith(first))
        if "| jq" in code and shutil.which("jq") is None:
            pytest.skip("jq is not installed")
        script = "\n".join(line for line in code.replace("\\\n", " ").splitlines()
                           if " ... " not in line)
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=work,
                              env=environment, capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, f"{first}\n{done.stderr[-3000:]}"
    _outcomes(session, work)


def _outcomes(session: str, work: Path) -> None:
    """What each session's last block made, read back."""
    def records(name: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (work / name).read_text("utf-8").splitlines()]

    if session.startswith("README"):
        assert [r["mode"] for r in records("out.jsonl")] == ["rewrite"]
        assert records("audit.jsonl")[0]["result"]["judge"]["score"] < 5  # 1963 is wrong
        assert "<html" in (work / "report.html").read_text("utf-8")
    else:
        assert [r["result"]["verdict"] for r in records("checked.jsonl")] == ["hallucinated"]
        assert records("piped.jsonl")[0]["id"] == "a1"
