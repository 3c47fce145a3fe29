"""conli batch stops counting nothing short (issue 47.2).

Every model call a run made is in its summary, those of records still running when an
early stop came included; and a backend that answers 200 with garbage (every record
``unverified`` on invalid answers) stops the run as a failing backend does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conli.backends.base import Message
from conli.backends.fake import ScriptedBackend
from conli.batch.local import run
from conli.batch.summary import Summary
from conli.batch.work import make_worker
from conli.config import Settings
from conli.errors import TransientBackendError
from tests.support import scripted
from tests.support.paths import ROOT

SOURCE = "The Riverside library opened in 1962. The city council runs it."
GARBAGE = "<html><body>Welcome to nginx!</body></html>"


def _records(n: int) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "source": SOURCE,
             "response": f"The library opened in 1962. Record {i} is FALSE here."}
            for i in range(n)]


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def _out(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries without their waits: a failing record takes its four attempts at once."""
    monkeypatch.setattr("conli.backends.retry._sleep", lambda seconds: None)


def test_the_summary_counts_the_calls_of_records_still_running_at_an_early_stop(
    tmp_path: Path, no_backoff: None,
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(src, _records(12))

    def overloaded(messages: list[Message]) -> TransientBackendError:
        time.sleep(0.05)  # four records run side by side: two are still running at the stop
        return TransientBackendError("HTTP 503: overloaded")

    backend = ScriptedBackend(responder=overloaded, judges_batches=True, max_concurrency=4)
    summary = run(src, out, make_worker(Settings(), "check", backend), concurrency=4,
                  progress=False, stop_after=2)

    assert summary.stopped and summary.exit_code == 3
    assert [r["id"] for r in _out(out)] == ["r0", "r1"]  # the rest stay out for a re-run
    assert summary.calls + summary.failed_calls == len(backend.calls)  # every call the backend got
    assert summary.in_flight >= 2 and summary.failed_calls > 4 * 2
    assert f"records running when the run stopped: {summary.in_flight}" in summary.format()


@pytest.mark.parametrize("mode", ["check", "judge"])
def test_a_backend_answering_garbage_from_the_start_stops_the_run(
    tmp_path: Path, mode: str,
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(src, _records(8))
    garbage = ScriptedBackend(responder=lambda m: GARBAGE, judges_batches=True)
    summary = run(src, out, make_worker(Settings(), mode, garbage),  # type: ignore[arg-type]
                  concurrency=1, progress=False, stop_after=3, backend="openai:wrong-endpoint")

    assert summary.exit_code == 3 and summary.stopped
    assert "the first 3 records all ended unverified" in summary.stopped
    assert "openai:wrong-endpoint" in summary.stopped and "invalid answer" in summary.stopped
    rows = _out(out)
    assert [r["id"] for r in rows] == ["r0", "r1", "r2"]  # stopped there, as a failing backend
    assert all(not r["ok"] and r["retryable"] for r in rows)  # so a re-run checks them again
    assert summary.errors == 3 and not summary.outcomes
    assert summary.calls + summary.failed_calls == len(garbage.calls)

    again = run(src, out, make_worker(Settings(), mode, scripted.backend()),  # type: ignore[arg-type]
                concurrency=1, progress=False, stop_after=3)
    assert (again.processed, again.errors, again.exit_code) == (8, 0, 0)
    assert [r["id"] for r in _out(out)] == [f"r{i}" for i in range(8)]
    assert all(r["ok"] for r in _out(out))


def test_invalid_answers_after_a_valid_one_are_unverified_records_not_a_stop(
    tmp_path: Path,
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(src, _records(5))
    answer = scripted.responder()
    once_good = ScriptedBackend(  # answers record 0 as asked, then garbage
        responder=lambda m: answer(m) if "Record 0 " in m[-1]["content"] else GARBAGE,
        judges_batches=True)
    summary = run(src, out, make_worker(Settings(), "check", once_good), concurrency=1,
                  progress=False, stop_after=2)

    assert not summary.stopped and summary.exit_code == 0
    assert summary.outcomes == {"hallucinated": 1, "unverified": 4}


def test_a_record_unverified_for_another_reason_does_not_count_toward_the_stop() -> None:
    summary = Summary(stop_after=1)
    summary.add({"id": "a", "ok": True, "result": {
        "verdict": "unverified", "usage": {"calls": 1},
        "sentences": [{"verdict": "unverified", "judgements": [
            {"verdict": "unverified",
             "error": "the model gave no judgement for this hypothesis"}]}],
    }})
    assert not summary.stopped and summary.exit_code == 0


@pytest.mark.integration
def test_cli_stops_a_garbage_backend_with_exit_3_naming_it(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(src, _records(20))
    env = {**os.environ, "CONLI_TEST_FAKE": "1", "PYTHONPATH": str(ROOT)}

    def batch(llm: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tests.support.batch_runner", "batch", str(src), str(out),
             "--llm", llm, "--mode", "check", "--no-progress"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)

    stopped = batch("garbage")
    assert stopped.returncode == 3, stopped.stderr
    assert "stopped early: the first 5 records all ended unverified" in stopped.stderr
    assert "the backend garbage answered, but never as asked" in stopped.stderr
    assert "no JSON object" in stopped.stderr
    assert "CONLI_BATCH_STOP_AFTER_FAILURES" in stopped.stderr
    assert len(_out(out)) == 5

    resumed = batch("fake")  # the backend fixed: the five run again, with the rest
    assert resumed.returncode == 0, resumed.stderr
    assert [r["id"] for r in _out(out)] == [f"r{i}" for i in range(20)]
