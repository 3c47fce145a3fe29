"""conli batch: modes, failing records, bounded streaming, and resume after kill / Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conli.batch.local import READ_AHEAD, run
from conli.batch.records import OutLog, record_key
from conli.batch.work import make_worker
from conli.config import Settings
from tests.support import scripted
from tests.support.batch import _out, _wait_for_lines, _write_jsonl
from tests.support.paths import ROOT

SOURCE = "The Riverside library opened in 1962. The city council runs it."


def _records(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "source": SOURCE,
             "response": f"The library opened in 1962. Record {i} is FALSE here.", **extra}
            for i in range(n)]


@pytest.mark.parametrize("mode", ["check", "rewrite", "judge"])
def test_modes_and_failing_records(tmp_path: Path, mode: str) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    bad = [{"id": "empty", "source": SOURCE, "response": "   "}, {"id": 7, "source": SOURCE}]
    _write_jsonl(src, [*_records(4), *bad], tail="this line is not json\n")
    backend = scripted.backend(concurrency=3)
    work = make_worker(Settings(), mode, backend)  # type: ignore[arg-type]
    summary = run(src, out, work, concurrency=3, progress=False)

    rows = {record_key(r): r for r in _out(out)}
    assert set(rows) == {'"r0"', '"r1"', '"r2"', '"r3"', '"empty"', "7", "line 7"}
    assert rows['"empty"']["error"]["type"] == "EmptyInputError"
    assert rows["7"]["ok"] is False and rows["line 7"]["id"] is None
    assert rows["7"]["error"] == {  # says what is missing, not "EncodingError ... NoneType"
        "type": "InputError",
        "message": "the record has no 'response' field; each line needs id, source and response"}
    assert not rows["7"]["retryable"] and not rows["line 7"]["retryable"]
    assert summary.errors == 3 and summary.processed == 7
    result = rows['"r0"']["result"]
    if mode == "judge":
        assert result["judge"]["score"] == 2 and summary.outcomes == Counter({"score 2": 4})
    else:
        assert result["verdict"] == "hallucinated" and summary.outcomes["hallucinated"] == 4
        assert result["judge_refined"] is None  # the judge is not part of check/rewrite
        rewritten = mode == "rewrite"
        assert (result["mitigation"]["status"] == "rewritten") is rewritten
        assert ("FALSE" in result["refined_text"]) is not rewritten
    assert summary.calls > 0 and summary.prompt_tokens > 0
    assert "errors 3" in summary.format()


def test_input_is_streamed_with_bounded_work_in_flight(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(src, _records(80))
    concurrency, lag = 2, []

    def work(record: dict[str, Any]) -> dict[str, Any]:
        number = int(record["id"][1:])
        written = len(out.read_bytes().splitlines())
        lag.append(number - written)  # records read ahead of those already written
        time.sleep(0.005)
        return {"id": record["id"], "ok": True, "result": {"verdict": "supported"}}

    summary = run(src, out, work, concurrency=concurrency, progress=False)
    assert summary.processed == 80
    assert max(lag) <= READ_AHEAD * concurrency < 80  # never the whole file in memory


def test_records_are_written_in_input_order_whatever_finishes_first(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(src, _records(12)[:6], tail="not json\n" + "".join(
        json.dumps(r) + "\n" for r in _records(12)[6:]))

    def work(record: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.01 * (12 - int(record["id"][1:])))  # the first records finish last
        return {"id": record["id"], "ok": True, "result": {"verdict": "supported"}}

    run(src, out, work, concurrency=4, progress=False)
    keys = [record_key(r) for r in _out(out)]
    assert keys == [*[f'"r{i}"' for i in range(6)], "line 7", *[f'"r{i}"' for i in range(6, 12)]]


def test_a_rerun_puts_the_records_it_ran_again_in_their_place(tmp_path: Path) -> None:
    from conli.backends.fake import ScriptedBackend
    from conli.errors import TransientBackendError

    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(src, _records(4))
    answer = scripted.responder()
    flaky = ScriptedBackend(responder=lambda m: TransientBackendError("HTTP 503")
                            if "Record 1 " in m[-1]["content"] else answer(m),
                            judges_batches=True)
    run(src, out, make_worker(Settings(), "check", flaky), concurrency=1, progress=False)
    assert [(r["id"], r["ok"]) for r in _out(out)] == [
        ("r0", True), ("r1", False), ("r2", True), ("r3", True)]

    again = run(src, out, make_worker(Settings(), "check", scripted.backend()), concurrency=1,
                progress=False)
    assert again.processed == 1 and again.skipped == 3  # only r1 ran again
    assert [(r["id"], r["ok"]) for r in _out(out)] == [  # and it is back in its place
        ("r0", True), ("r1", True), ("r2", True), ("r3", True)]


def test_resume_skips_done_ids_and_drops_a_torn_last_line(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    records = _records(5)
    _write_jsonl(src, [*records, records[1]])  # r1 twice in IN: processed once
    done = [{"id": "r0", "ok": True, "result": {"verdict": "supported"}}]
    _write_jsonl(out, done, tail='{"id": "r1", "ok": tr')  # killed mid-write
    opened = OutLog(out)
    opened.close()
    assert opened.done == {'"r0"'} and out.read_bytes().endswith(b"}\n")

    work = make_worker(Settings(), "check", scripted.backend())
    summary = run(src, out, work, concurrency=1, progress=False)
    ids = [r["id"] for r in _out(out)]
    assert sorted(ids, key=str) == [None, "r0", "r1", "r2", "r3", "r4"]  # None: the repeat
    assert summary.skipped == 1 and summary.errors == 1 and summary.processed == 5


def test_a_garbled_line_in_the_middle_of_out_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text('{"id": "a"}\ngarbage\n{"id": "b"}\n', encoding="utf-8")
    with pytest.raises(Exception, match="line 2"):
        OutLog(out)


def _start(src: Path, out: Path, *, sleep: float) -> subprocess.Popen[str]:
    env = {**os.environ, "CONLI_TEST_FAKE": "1", "CONLI_TEST_FAKE_SLEEP": str(sleep),
           "CONLI_TEST_FAKE_CONCURRENCY": "2", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.batch_runner", "batch", str(src), str(out),
         "--llm", "fake", "--mode", "rewrite", "--no-progress"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a shell starting us in the background ignores SIGINT, and children inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


@pytest.mark.integration
@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGINT])
def test_killed_mid_run_then_resumed_holds_every_id_once(tmp_path: Path, stop: int) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    records = _records(24)
    _write_jsonl(src, records)

    first = _start(src, out, sleep=0.08)
    _wait_for_lines(out, 4, first)
    first.send_signal(stop)
    _, err = first.communicate(timeout=60)
    if stop == signal.SIGINT:
        assert first.returncode == 130 and "interrupted" in err
    else:
        assert first.returncode == -signal.SIGKILL
    partial = _out(out)  # whole lines only, even right after the kill
    assert 4 <= len(partial) < len(records)
    assert [r["id"] for r in partial] == [r["id"] for r in records[:len(partial)]]  # in order

    second = _start(src, out, sleep=0.0)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert f"{len(partial)} already in OUT" in err
    rows = _out(out)
    assert [r["id"] for r in rows] == [r["id"] for r in records]  # each once, in IN's order
    assert all(r["ok"] and r["result"]["mitigation"]["status"] == "rewritten" for r in rows)


def _cli(*args: str, llm: str = "fake", **env: str) -> subprocess.CompletedProcess[str]:
    """``conli batch ARGS --llm LLM --no-progress`` in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "tests.support.batch_runner", "batch", *args, "--llm", llm,
         "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "CONLI_TEST_FAKE": "1", "PYTHONPATH": str(ROOT), **env},
    )


@pytest.mark.integration
def test_cli_batch_reports_errors_with_exit_code(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(src, [{"id": "x", "source": SOURCE, "response": ""}])
    done = _cli(str(src), str(out), "--mode", "judge")
    assert done.returncode == 1 and "errors 1" in done.stderr
    missing = _cli(str(tmp_path / "nope.jsonl"), str(out), "--mode", "judge")
    assert missing.returncode == 2 and "cannot read input" in missing.stderr


@pytest.mark.integration
def test_a_repeated_run_counts_the_failures_out_already_holds(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(src, [*_records(2), {"id": "empty", "source": SOURCE, "response": " "}])
    first = _cli(str(src), str(out), "--mode", "check")
    assert first.returncode == 1 and "errors 1" in first.stderr
    again = _cli(str(src), str(out), "--mode", "check")  # nothing left to run
    assert "3 already in OUT" in again.stderr
    assert again.returncode == 1, again.stderr  # OUT still holds a failed record
    assert "errors 1 (0 this run)" in again.stderr


@pytest.mark.integration
def test_a_backend_failing_every_call_stops_the_run_and_a_rerun_does_the_rest(
    tmp_path: Path,
) -> None:
    src, out, calls = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "calls.log"
    records = _records(20)
    _write_jsonl(src, records)
    failed = _cli(str(src), str(out), "--mode", "check", llm=f"failing:{calls}")
    assert failed.returncode == 3, failed.stderr  # as rejected credentials stop a run
    assert "stopped early: 5 records in a row failed on the backend" in failed.stderr
    assert "HTTP 503" in failed.stderr and "CONLI_BATCH_STOP_AFTER_FAILURES" in failed.stderr
    rows = _out(out)
    assert 5 <= len(rows) <= 6  # the 5 that failed (and one already running), not all 20
    assert all(r["ok"] is False and r["retryable"] for r in rows)
    made = calls.read_text().count("call")
    assert made <= 4 * len(rows) + 4  # nothing more was tried
    # each record failed after four attempts, and the record says so; the summary counts
    # every call the backend got, those of a record still running at the stop too
    assert all(r["usage"] == {"calls": 0, "failed_calls": 4} for r in rows)
    assert f"0 model calls answered, {made} failed" in failed.stderr

    resumed = _cli(str(src), str(out), "--mode", "check")  # the backend is back
    assert resumed.returncode == 0, resumed.stderr
    assert Counter(r["id"] for r in _out(out)) == Counter(r["id"] for r in records)
    assert all(r["ok"] for r in _out(out))

    never = _cli(str(src), str(tmp_path / "never.jsonl"), "--mode", "check",
                 "--stop-after-failures", "0", llm="failing", CONLI_TEST_FAKE_CONCURRENCY="4")
    assert never.returncode == 1 and "errors 20" in never.stderr  # 0: every record is tried


@pytest.mark.integration
def test_fake_backend_is_not_registered_in_production() -> None:
    code = "from conli.backends import backend_names; print(backend_names())"
    env = {k: v for k, v in os.environ.items() if k != "CONLI_TEST_FAKE"}
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                           check=True)
    assert "fake" not in shown.stdout


def test_a_record_that_cannot_be_encoded_is_an_error_record_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    # JSON may spell a lone surrogate; Python then holds text that no UTF-8 file can
    bad = '{"id": "bad", "source": "' + SOURCE + '", "response": "It \\ud800 opened in 1962."}'
    lines = [bad, json.dumps(_records(1)[0])]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    work = make_worker(Settings(), "check", scripted.backend())
    summary = run(src, out, work, concurrency=1, progress=False)
    rows = {r["id"]: r for r in _out(out)}
    assert rows["bad"]["ok"] is False and rows["bad"]["error"]["type"] == "EncodingError"
    assert "surrogate" in rows["bad"]["error"]["message"]
    assert rows["r0"]["ok"] is True  # the good record behind it was done
    assert summary.errors == 1
    again = run(src, out, work, concurrency=1, progress=False)  # a re-run does not crash
    assert again.skipped == 2 and again.processed == 0


def test_ids_are_unambiguous_and_a_duplicate_is_an_error_record(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    base = _records(1)[0]
    _write_jsonl(src, [{**base, "id": "1"}, {**base, "id": 1}, {**base, "id": "line 4"},
                       {**base, "id": 1}], tail="not json\n")
    work = make_worker(Settings(), "check", scripted.backend())
    summary = run(src, out, work, concurrency=1, progress=False)
    rows = _out(out)
    by_key = {record_key(r): r for r in rows}
    assert len(rows) == len(by_key) == 5  # every record once, none silently dropped
    assert by_key['"1"']["ok"] and by_key["1"]["ok"] and by_key['"line 4"']["ok"]
    assert "repeats the id of line 2" in by_key["line 4"]["error"]["message"]
    assert by_key["line 5"]["id"] is None and not by_key["line 5"]["ok"]
    assert summary.errors == 2
    assert run(src, out, work, concurrency=1, progress=False).skipped == 5


def test_a_dead_backend_fails_records_retryably_and_a_rerun_retries_them(tmp_path: Path) -> None:
    from conli.backends.fake import ScriptedBackend
    from conli.errors import AuthenticationError, TransientBackendError

    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(src, _records(3))
    flaky = ScriptedBackend(responder=lambda m: TransientBackendError("HTTP 503"))
    summary = run(src, out, make_worker(Settings(), "check", flaky), concurrency=1,
                  progress=False)
    assert summary.errors == 3 and not summary.stopped
    assert all(r["ok"] is False and r["retryable"] for r in _out(out))

    dead = ScriptedBackend(responder=lambda m: AuthenticationError("HTTP 401: bad key"))
    summary = run(src, out, make_worker(Settings(), "check", dead), concurrency=1,
                  progress=False)
    assert summary.stopped and "bad key" in summary.stopped  # stopped at the first record
    assert summary.processed < 3  # no new record starts once one has stopped the run

    summary = run(src, out, make_worker(Settings(), "check", scripted.backend()), concurrency=1,
                  progress=False)
    rows = _out(out)
    assert summary.processed == 3 and summary.errors == 0
    assert [r["id"] for r in rows] == ["r0", "r1", "r2"] and all(r["ok"] for r in rows)


@pytest.mark.integration
@pytest.mark.parametrize("target", ["dir", "missing-dir", "file-as-dir"])
def test_batch_refuses_an_unwritable_out_before_any_work(tmp_path: Path, target: str) -> None:
    src = tmp_path / "in.jsonl"
    _write_jsonl(src, _records(1))
    (tmp_path / "afile").write_text("x")
    out = {"dir": tmp_path, "missing-dir": tmp_path / "nope" / "out.jsonl",
           "file-as-dir": tmp_path / "afile" / "out.jsonl"}[target]
    env = {**os.environ, "CONLI_TEST_FAKE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.batch_runner", "batch", str(src), str(out), "--llm",
         "fake", "--no-progress"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "cannot write" in done.stderr
    assert "Traceback" not in done.stderr
