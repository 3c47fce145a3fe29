"""``conli batch`` reads CSV, Parquet and stdin, with RAGAS' and DeepEval's field names, and
refuses an OUT written in another ``--mode`` (issue 65, items 2 and 7).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from conli.backends import register_backend
from conli.cli.app import main
from tests.support import scripted

SOURCE = "The Riverside library opened in 1962. The city council runs it."
GOOD = "The library opened in 1962."
BAD = "The library opened in 1962. A FALSE charity runs it."


@pytest.fixture(autouse=True)
def _fake_backend() -> None:
    register_backend("fake-inputs", lambda _arg, _settings: scripted.backend())


def _batch(*args: str) -> int:
    return main(["batch", *args, "--llm", "fake-inputs", "--no-progress"])


def _out(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_a_csv_with_ragas_columns_runs_a_record_a_row_and_resumes(tmp_path: Path) -> None:
    frame = pd.DataFrame({"user_input": ["When did it open?", "Who runs it?"],
                          "retrieved_contexts": [[SOURCE], [SOURCE, "It has a cafe."]],
                          "response": [GOOD, BAD], "reference": ["1962", "the council"]})
    frame.to_csv(tmp_path / "ragas.csv", index=False)  # lists as pandas writes them: ['...']
    out = tmp_path / "out.jsonl"
    assert _batch(str(tmp_path / "ragas.csv"), str(out), "--mode", "check") == 0
    rows = _out(out)
    assert [r["id"] for r in rows] == [1, 2]  # no id column: the row's number
    assert [r["result"]["verdict"] for r in rows] == ["supported", "hallucinated"]
    assert rows[1]["source"] == [SOURCE, "It has a cafe."]  # the list column, read as chunks
    assert _batch(str(tmp_path / "ragas.csv"), str(out), "--mode", "check") == 0
    assert len(_out(out)) == 2  # a re-run resumes by row


def test_a_parquet_file_with_deepeval_columns_and_its_own_ids(tmp_path: Path) -> None:
    pd.DataFrame({"id": ["a", "b"], "input": ["Q?", None], "actual_output": [GOOD, BAD],
                  "retrieval_context": [[SOURCE], [SOURCE]]}).to_parquet(tmp_path / "in.pq")
    out = tmp_path / "out.jsonl"
    assert _batch(str(tmp_path / "in.pq"), str(out), "--mode", "rewrite") == 0
    rows = _out(out)
    assert [r["id"] for r in rows] == ["a", "b"]
    assert rows[1]["result"]["mitigation"]["status"] == "rewritten"


def test_stdin_is_read_as_jsonl_or_as_the_format_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.jsonl"
    _stdin(monkeypatch, (json.dumps({"id": "s1", "source": SOURCE, "response": BAD}) + "\n"
                         + json.dumps({"id": "s2", "retrieval_context": [SOURCE],
                                       "actual_output": GOOD}) + "\n").encode())
    assert _batch("-", str(out), "--mode", "check") == 0
    assert [r["result"]["verdict"] for r in _out(out)] == ["hallucinated", "supported"]
    _stdin(monkeypatch, f'id,source,response\nc1,"{SOURCE}",{GOOD}\n'.encode())
    csv_out = tmp_path / "csv-out.jsonl"
    assert _batch("-", str(csv_out), "--mode", "check", "--input-format", "csv") == 0
    assert [r["id"] for r in _out(csv_out)] == ["c1"]


def test_a_csv_cell_that_is_empty_fails_its_record_only(tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text(f"source,response\n{SOURCE},\n{SOURCE},{GOOD}\n", "utf-8")
    out = tmp_path / "out.jsonl"
    assert _batch(str(tmp_path / "in.csv"), str(out), "--mode", "check") == 1
    first, second = _out(out)
    assert first["ok"] is False and "response" in first["error"]["message"]
    assert second["ok"] is True


@pytest.mark.parametrize(("name", "data", "said"), [
    ("in.csv", b"source,answer\nx,y\n", "IN has no response column (its columns: "
                                        "['source', 'answer'])"),
    ("in.csv", b"source,response\ncaf\xe9,y\n", "IN is not valid UTF-8"),
    ("in.parquet", b"not parquet at all", "IN is not a Parquet file"),
])
def test_a_table_conli_cannot_read_is_refused_before_any_record(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, data: bytes,
        said: str) -> None:
    (tmp_path / name).write_bytes(data)
    out = tmp_path / "out.jsonl"
    assert _batch(str(tmp_path / name), str(out), "--mode", "check") == 2
    assert said in capsys.readouterr().err
    assert not out.exists() or out.read_text() == ""


def test_an_out_written_in_another_mode_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's batch then audit into one out.jsonl did nothing and exited 0."""
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps({"id": "a1", "source": SOURCE, "response": BAD}) + "\n", "utf-8")
    assert _batch(str(src), str(out), "--mode", "rewrite") == 0
    before = out.read_bytes()
    assert _batch(str(src), str(out), "--mode", "judge", "--judge-mode", "both") == 2
    err = capsys.readouterr().err
    assert "holds records of another mode (1 written in --mode rewrite)" in err
    assert f"{tmp_path / 'out'}-judge.jsonl" in err
    assert out.read_bytes() == before
    assert _batch(str(src), str(out), "--mode", "rewrite") == 0  # the same mode resumes
