"""conli batch runs the records that share a source together (issue 56.3).

A backend whose prompt cache holds one prompt (the embedded model's slot) then reads each
source once, not once a record; OUT still ends in IN's order, and a run that stops or is
killed midway loses nothing and resumes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conli.backends.base import Message
from conli.batch.local import run
from conli.batch.records import Intake, schedule
from conli.batch.work import make_worker
from conli.config import Settings
from conli.errors import AuthenticationError
from tests.support import scripted
from tests.support.batch import _out, _wait_for_lines, _write_jsonl
from tests.support.one_slot import OneSlotCache
from tests.support.paths import ROOT

POOL = "The Riverside pool opened in 1962. It cost 2.4 million dollars to build."
BRIDGE = "A bridge over the Riverside opened in 1998. It is 240 metres long, with two lanes."


def _interleaved(n: int) -> list[dict[str, Any]]:
    """``n`` records whose sources alternate: pool, bridge, pool, bridge, ..."""
    return [{"id": f"r{i}", "source": POOL if i % 2 == 0 else BRIDGE,
             "response": f"It opened long ago. Record {i} is {'FALSE' if i % 3 else 'fine'}."}
            for i in range(n)]


def test_six_records_over_two_interleaved_sources_read_each_source_once(
        tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    records = _interleaved(6)
    _write_jsonl(src, records)
    backend = OneSlotCache(responder=scripted.responder(), judges_batches=True)
    summary = run(src, out, make_worker(Settings(), "check", backend), concurrency=1,
                  progress=False)

    assert summary.processed == 6 and summary.errors == 0
    assert backend.reads(POOL) == 1 and backend.reads(BRIDGE) == 1  # in IN's order: 3 each
    rows = _out(out)
    assert [r["id"] for r in rows] == [r["id"] for r in records]  # OUT as IN has them
    assert [r["source"] for r in rows] == [POOL, BRIDGE] * 3
    assert [r["response"] for r in rows] == [r["response"] for r in records]
    assert all(r["result"]["verdict"] == "hallucinated" for r in rows if "FALSE" in r["response"])
    assert summary.cached_tokens > 0


def test_with_several_threads_records_start_grouped_and_out_ends_in_ins_order(
        tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    records = _interleaved(9)
    _write_jsonl(src, records)
    started: list[str] = []
    lock = threading.Lock()

    def work(record: dict[str, Any]) -> dict[str, Any]:
        with lock:
            started.append(record["source"])
        time.sleep(0.01 * (9 - int(record["id"][1:])))  # the first records finish last
        return {"id": record["id"], "ok": True, "result": {"verdict": "supported"}}

    summary = run(src, out, work, concurrency=3, progress=False)
    assert summary.processed == 9
    # handed out source by source: the three threads all start on the first source
    assert started[:3] == [POOL] * 3 and sorted(started) == sorted([POOL] * 5 + [BRIDGE] * 4)
    assert [r["id"] for r in _out(out)] == [r["id"] for r in records]


def test_the_schedule_groups_by_source_text_or_chunks_in_order_of_first_record(
        tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    chunks = ["The pool opened in 1962.", "It cost 2.4 million dollars."]
    lines = [{"id": "a1", "source": POOL}, {"id": "c1", "source": chunks},
             {"id": "b1", "source": BRIDGE}, {"id": "a2", "source": POOL},
             {"id": "c2", "source": list(chunks)}, {"id": "b1", "source": BRIDGE},
             {"id": "b2", "source": BRIDGE}]
    _write_jsonl(src, lines, tail="not json\n")
    planned, skipped = schedule(src, Intake({json.dumps("a2")}))  # a2 is in OUT already
    order = [(number, given["line"] if given else lines[number - 1]["id"])
             for number, _offset, given in planned]
    # groups in the order of their first record; the repeated id and the bad line keep
    # their own place, as error records
    assert order == [(1, "a1"), (2, "c1"), (5, "c2"), (3, "b1"), (7, "b2"), (6, 6), (8, 8)]
    assert skipped == 1


def test_a_run_stopped_midway_keeps_what_ran_in_ins_order_and_resumes(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    records = _interleaved(6)
    _write_jsonl(src, records)
    answer, seen = scripted.responder(), []

    def refuses_the_bridge(messages: list[Message]) -> str | AuthenticationError:
        text = messages[-1]["content"]
        seen.append("bridge" if BRIDGE in text else "pool")
        return AuthenticationError("HTTP 401: bad key") if BRIDGE in text else answer(messages)

    dead = OneSlotCache(responder=refuses_the_bridge, judges_batches=True)
    stopped = run(src, out, make_worker(Settings(), "check", dead), concurrency=1,
                  progress=False)
    assert stopped.stopped and "bad key" in stopped.stopped
    assert "pool" not in seen[seen.index("bridge"):]  # every pool record ran first
    rows = _out(out)
    assert [r["id"] for r in rows] == ["r0", "r1", "r2", "r4"]  # in IN's order
    assert [r["ok"] for r in rows] == [True, False, True, True]

    backend = OneSlotCache(responder=scripted.responder(), judges_batches=True)
    resumed = run(src, out, make_worker(Settings(), "check", backend), concurrency=1,
                  progress=False)
    assert resumed.skipped == 3 and resumed.processed == 3  # r1 failed retryably: again
    assert backend.reads(POOL) == 0 and backend.reads(BRIDGE) == 1
    rows = _out(out)
    assert [r["id"] for r in rows] == [r["id"] for r in records] and all(r["ok"] for r in rows)


def _start(src: Path, out: Path, *, sleep: float) -> subprocess.Popen[str]:
    """``conli batch`` on the fake model in a process of its own (this checkout's conli)."""
    env = {**os.environ, "CONLI_TEST_FAKE": "1", "CONLI_TEST_FAKE_SLEEP": str(sleep),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.batch_runner", "batch", str(src), str(out),
         "--llm", "fake", "--mode", "check", "--no-progress"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.integration
def test_killed_midway_then_resumed_holds_every_id_once_in_ins_order(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    records = _interleaved(24)
    _write_jsonl(src, records)
    first = _start(src, out, sleep=0.08)
    _wait_for_lines(out, 4, first)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    partial = [r["id"] for r in _out(out)]  # whole lines only, in the order they ran
    pool_first = [r["id"] for r in records if r["source"] == POOL]
    assert 4 <= len(partial) < len(records) and partial == pool_first[:len(partial)]

    second = _start(src, out, sleep=0.0)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert f"{len(partial)} already in OUT" in err
    assert [r["id"] for r in _out(out)] == [r["id"] for r in records]
