"""Many pairs as data (issue 65, item 2): a DataFrame or an HF dataset in and out, RAGAS' and
DeepEval's field names, a progress callback, and ``acheck_many`` with its bound and cancel.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import pandas as pd
import pytest

import conli
from conli import Checker
from conli.backends.base import Message
from conli.errors import ConfigError, InputError
from tests.support import scripted
from tests.support.many import SOURCE, Peak, _backend, _settings

GOOD = "It opened in 1962."
BAD = "It charges FALSE fees."


def _checker(**more: object) -> Checker:
    return Checker(_settings(**more), backend=_backend(scripted.responder()))


def test_a_dataframe_is_read_by_its_columns_and_comes_back_with_its_index() -> None:
    frame = pd.DataFrame({"source": [SOURCE, SOURCE, SOURCE], "response": [GOOD, BAD, "  "],
                          "question": ["When?", None, None], "team": ["a", "b", "c"]},
                         index=["q1", "q2", "q3"])
    with _checker() as checker:
        results = checker.check_many(frame, progress=False)
    assert [r.verdict for r in results] == ["supported", "hallucinated", None]
    table = results.to_pandas()
    assert list(table.index) == ["q1", "q2", "q3"]
    joined = frame.join(table)
    assert list(joined["verdict"][:2]) == ["supported", "hallucinated"]
    assert joined.loc["q2", "flagged"] == [BAD]
    assert joined.loc["q3", "error_type"] == "EmptyInputError"
    assert list(table.columns) == ["verdict", "score", "passed", "supported_share",
                                   "flagged", "refined_text", "error_type", "error"]


def test_a_table_without_a_response_column_is_refused_at_once_naming_its_columns() -> None:
    backend = _backend(scripted.responder())
    with Checker(_settings(), backend=backend) as checker, pytest.raises(
            InputError, match=r"no response column \(its columns: \['source', 'answer'\]\)"):
        checker.check_many(pd.DataFrame({"source": [SOURCE], "answer": [GOOD]}))
    assert backend.calls == []


RAGAS = [{"user_input": "When did it open?", "retrieved_contexts": [SOURCE, "It has a cafe."],
          "response": GOOD, "reference": "In 1962."},
         {"user_input": "What does it charge?", "retrieved_contexts": [SOURCE],
          "response": BAD, "reference_contexts": [SOURCE]}]


def test_ragas_rows_are_read_by_ragas_names() -> None:
    backend = _backend(scripted.responder())
    with Checker(_settings(), backend=backend) as checker:
        results = checker.check_many(RAGAS, progress=False)
    assert [r.verdict for r in results] == ["supported", "hallucinated"]
    first = results[0].result
    assert first is not None and len(first.sentences) == 1
    asked = " ".join(m["content"] for call in backend.calls for m in call)
    assert "It has a cafe." in asked and "When did it open?" in asked  # chunks and question


@dataclass
class TestCase:
    """DeepEval's ``LLMTestCase``, as its fields are named (an object, not a mapping)."""

    __test__ = False  # not a pytest class
    input: str
    actual_output: str
    retrieval_context: list[str]
    expected_output: str | None = None


def test_deepeval_test_cases_and_rows_are_read_by_deepevals_names() -> None:
    cases: list[Any] = [TestCase("When did it open?", GOOD, [SOURCE]),
                        {"input": "Fees?", "actual_output": BAD, "retrieval_context": [SOURCE],
                         "expected_output": "None."}]
    with _checker() as checker:
        results = checker.check_many(cases, progress=False)
    assert [r.verdict for r in results] == ["supported", "hallucinated"]


def test_a_misspelt_key_is_still_an_error_in_its_place() -> None:
    with _checker() as checker:
        results = checker.check_many([{"source": SOURCE, "reponse": GOOD}], progress=False)
    (failed,) = results
    assert failed.error is not None and "unknown keys ['reponse']" in failed.error.message


def test_an_hf_dataset_in_and_out() -> None:
    rows = datasets.Dataset.from_list(RAGAS)
    with _checker() as checker:
        results = checker.check_many(rows, progress=False)
    out = results.to_dataset()
    assert isinstance(out, datasets.Dataset)
    assert out["verdict"] == ["supported", "hallucinated"]
    assert out["flagged"] == [[], [BAD]]


def test_a_parquet_table_read_by_pandas_gives_list_columns_as_arrays(tmp_path: Path) -> None:
    pd.DataFrame(RAGAS).to_parquet(tmp_path / "rag.parquet")
    frame = pd.read_parquet(tmp_path / "rag.parquet")
    assert type(frame["retrieved_contexts"][0]).__name__ == "ndarray"
    with _checker() as checker:
        results = checker.check_many(frame, progress=False)
    assert [r.verdict for r in results] == ["supported", "hallucinated"]


def test_progress_may_be_a_callback_of_done_and_total() -> None:
    seen: list[tuple[int, int]] = []
    with _checker() as checker:
        checker.check_many([(SOURCE, GOOD)] * 3, progress=lambda done, total: seen.append(
            (done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_without_pandas_to_pandas_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    with _checker() as checker:
        results = checker.check_many([(SOURCE, GOOD)], progress=False)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ConfigError, match=r"needs pandas: pip install -e '\.\[data\]'"):
        results.to_pandas()


@pytest.mark.integration
def test_importing_conli_and_reading_tables_import_no_pandas() -> None:
    import subprocess

    code = ("import sys, conli, conli.run.many, conli.run.table; "
            "assert 'pandas' not in sys.modules and 'datasets' not in sys.modules")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# --- acheck_many ------------------------------------------------------------------------------


def test_acheck_many_keeps_order_bounds_its_checks_and_reports_progress() -> None:
    peak = Peak(2)
    seen: list[tuple[int, int]] = []
    checker = Checker(_settings(max_concurrency=8), backend=_backend(peak))
    pairs = [(SOURCE, "It opened in 1962, said a reader" + " again" * n + ".") for n in range(8)]
    frame = pd.DataFrame({"source": [p[0] for p in pairs], "response": [p[1] for p in pairs]})

    results = asyncio.run(conli.acheck_many(
        frame, checker=checker, max_concurrency=2,
        progress=lambda done, total: seen.append((done, total))))
    checker.close()
    assert [r.index for r in results] == list(range(8))
    assert all(r.verdict == "supported" for r in results), [r.error for r in results]
    assert peak.peak == 2
    assert seen == [(n, 8) for n in range(1, 9)]
    assert list(results.to_pandas().index) == list(range(8))


def test_cancelling_acheck_many_starts_no_further_model_call() -> None:
    asked = threading.Semaphore(0)
    release = threading.Event()
    calls: list[int] = []
    answer = scripted.responder()

    def respond(messages: list[Message]) -> str:
        calls.append(1)
        asked.release()
        release.wait(30)
        return answer(messages)

    checker = Checker(_settings(max_concurrency=8), backend=_backend(respond))

    async def cancelled() -> None:
        task = asyncio.create_task(conli.acheck_many(
            [(SOURCE, f"It opened in 1962, said reader {n}.") for n in range(6)],
            checker=checker, max_concurrency=2))
        for _ in range(2):
            while not asked.acquire(blocking=False):
                await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    release.set()
    checker.close()  # waits for the two checks in flight
    assert len(calls) == 2


def test_acheck_many_refuses_one_pair_and_a_bad_bound_before_any_call() -> None:
    backend = _backend(scripted.responder())
    checker = Checker(_settings(), backend=backend)
    with pytest.raises(TypeError, match=r"one \(source, response\) pair"):
        asyncio.run(conli.acheck_many((SOURCE, GOOD), checker=checker))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_concurrency"):
        asyncio.run(conli.acheck_many([(SOURCE, GOOD)], checker=checker, max_concurrency=0))
    checker.close()
    assert backend.calls == []
