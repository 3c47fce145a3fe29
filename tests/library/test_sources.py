"""Several sources (a RAG app's chunks) at every front door; each verdict names its chunk."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.errors import EmptyInputError, EncodingError, InputTooLargeError
from conli.hook import check_node
from conli.models import CheckResult
from conli.pipeline import Checker
from conli.run.inputs import MAX_SOURCES, SourceMap, check_input
from tests.support.paths import ROOT
from tests.support.sources import CHUNKS, RESPONSE, respond


def _checker() -> Checker:
    return Checker(Settings(word_scores="off", judge=False, mitigate=False),
                   backend=ScriptedBackend(responder=respond))


def _evidence(result: CheckResult) -> list[list[tuple[int, int, int, str]]]:
    return [[(e.source, e.start, e.end, e.relation) for e in s.evidence]
            for s in result.sentences]


def test_each_sentence_names_the_chunk_its_evidence_is_in() -> None:
    with _checker() as checker:
        result = checker.check(CHUNKS, RESPONSE)
    assert [s.verdict for s in result.sentences] == ["supported", "hallucinated"]
    (span,), none = result.sentences[0].evidence, result.sentences[1].evidence
    assert (span.source, span.relation) == (1, "supports") and none == []
    assert CHUNKS[1][span.start:span.end] == span.text == "It has three floors"


def test_one_string_is_source_zero_with_its_own_offsets() -> None:
    source = " ".join(CHUNKS)
    with _checker() as checker:
        result = checker.check(source, RESPONSE)
    (span,) = result.sentences[0].evidence
    assert span.source == 0 and source[span.start:span.end] == "It has three floors"


def test_a_quote_is_cut_at_its_chunk_and_the_map_round_trips() -> None:
    joined, where = SourceMap.joined(CHUNKS)
    assert joined == "\n\n".join(CHUNKS)
    for index, chunk in enumerate(CHUNKS):
        start = joined.index(chunk)
        assert where.place(start, start + len(chunk)) == (index, 0, len(chunk))
    first = len(CHUNKS[0])
    assert where.place(first - 5, first + 10) == (0, first - 5, first)  # no joiner, no next


@pytest.mark.parametrize(("source", "error", "match"), [
    ([], EmptyInputError, "sources is an empty list"),
    (["fine", "  "], EmptyInputError, r"sources\[1\] is empty"),
    (["fine", 3], EncodingError, r"sources\[1\] must be text"),
    (["x"] * (MAX_SOURCES + 1), InputTooLargeError, "over the limit"),
    (["a" * 60, "b" * 60], InputTooLargeError, "joined, over the limit of 100"),
])
def test_bad_sources_are_refused_by_name(source: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        check_input(source, "r", max_source_chars=100, max_response_chars=100)


def test_the_langgraph_node_reads_each_tool_message_as_a_source() -> None:
    with _checker() as checker:
        node = check_node(checker)
        out = node({"messages": [{"role": "user", "content": "Tell me about the library."},
                                 *({"role": "tool", "content": c} for c in CHUNKS),
                                 {"role": "assistant", "content": RESPONSE}]})
    result = out["check_result"]
    assert isinstance(result, CheckResult)
    assert _evidence(result)[0] == [(1, 0, 19, "supports")]


def _conli(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONLI_")}
    environment.update({"CONLI_TEST_FAKE": "1", "PYTHONPATH": str(ROOT)})
    return subprocess.run([sys.executable, "-m", "tests.support.cli_runner", *args], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


@pytest.mark.integration
def test_check_takes_repeated_sources_and_batch_a_list(tmp_path: Path) -> None:
    # the CLI's scripted backend quotes "the source says so" for every claim it passes
    chunks = ["The hall opened in 1962.", "The source says so: three floors.", "Gamma."]
    files = []
    for i, chunk in enumerate(chunks):
        files += ["--source", str(tmp_path / f"c{i}.txt")]
        (tmp_path / f"c{i}.txt").write_text(chunk, "utf-8")
    (tmp_path / "r.txt").write_text(RESPONSE, "utf-8")
    done = _conli("check", *files, "--response", str(tmp_path / "r.txt"), "--llm", "fake",
                  "--json", "--no-mitigate", "--no-judge")
    assert done.returncode in (0, 1), done.stderr
    sentences = json.loads(done.stdout)["sentences"]
    assert sentences[0]["evidence"][0]["source"] == 1
    assert sentences[0]["evidence"][0]["start"] == 0
    (tmp_path / "in.jsonl").write_text(json.dumps(
        {"id": "rag", "source": chunks, "response": RESPONSE}) + "\n", "utf-8")
    done = _conli("batch", str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl"),
                  "--mode", "check", "--llm", "fake", "--no-progress")
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "out.jsonl").read_text("utf-8"))
    assert record["source"] == chunks
    assert record["result"]["sentences"][0]["evidence"][0]["source"] == 1
    # the report shows each chunk labelled, the sentence's span marked in the one it names
    done = _conli("report", str(tmp_path / "out.jsonl"), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "r.html").read_text("utf-8")
    labels = re.findall(r'<span class="chunk-label">chunk (\d)</span><div class="text '
                        r'chunk-text">(.*?)</div>', page)
    assert [(int(n), re.sub(r"<[^>]*>", "", text)) for n, text in labels] == list(
        enumerate(chunks))
    assert '<a class="chunk-label" href="#r1-e0">chunk 1</a>' in page
    assert re.search(r'<span class="anchor" id="r1-e0"></span>(<span [^>]*></span>)*'
                     r'<mark class="span supports" title="sentence 1 supports[^"]*">'
                     r"The source says so</mark>", labels[1][1])


@pytest.mark.integration
def test_the_service_takes_a_list_of_sources_and_names_bad_ones(tmp_path: Path) -> None:
    httpx = pytest.importorskip("httpx")
    from tests.support.service import AUTH, KEY, serving

    chunks = ["The hall opened in 1962.", "The source says so: three floors."]
    body = {"source": chunks, "response": "The hall has three floors."}
    with serving(Settings(service_api_keys=[KEY])) as url:
        checked = httpx.post(f"{url}/v1/check", json=body, headers=AUTH)
        batch = httpx.post(f"{url}/v1/check/batch", json={"items": [body]}, headers=AUTH)
        empty = httpx.post(f"{url}/v1/check", json={**body, "source": []}, headers=AUTH)
    assert checked.status_code == 200, checked.text
    assert checked.json()["sentences"][0]["evidence"][0]["source"] == 1
    assert batch.status_code == 200, batch.text
    assert batch.json()["results"][0]["result"]["sentences"][0]["evidence"][0]["source"] == 1
    assert empty.status_code in (400, 422) and "sources is an empty list" in empty.text
