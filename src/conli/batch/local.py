"""``conli batch IN.jsonl OUT.jsonl``: check many records, concurrently and resumably.

IN holds one JSON object per line with ``id``, ``source`` and ``response`` (optionally
``question``, and ``points`` the response must cover: a list of strings or
``{perspective: [strings]}``). Records that share a source run one after another
(``conli.batch.records.schedule``), so the model reads that source once, not once a record.
Each result is appended to OUT as one JSON line, in the order the records run, flushed and
fsynced as soon as it and the records before it are done, so a crash or Ctrl-C loses only
records still running or waiting for an earlier one; re-running the same command skips ids
already in OUT (dropping a torn last line first). A run that completes, or stops, leaves OUT
in IN's order. A record that fails is written with its error.

Two engines share everything but the scheduling: ``--engine local`` (threads in this
process, ``run``) and ``--engine ray`` (an actor pool on a Ray cluster, ``conli.batch.ray_engine``,
imported only when asked for). Both decide what each input line becomes with ``Intake``
and write OUT with one ``OutLog`` (``conli.batch.records``), count the run in one
``Summary`` (``conli.batch.summary``), and run records with ``make_worker`` (``conli.batch.work``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from conli.batch.records import (
    Intake,
    OutLog,
    Record,
    line_error,
    read_at,
    schedule,
    stop_reason,
    stopped_record,
)
from conli.batch.summary import Summary, settle_stop
from conli.batch.work import Worker, progress_bar
from conli.errors import InputError

Engine = Literal["local", "ray"]
ENGINES: tuple[Engine, ...] = ("local", "ray")
# Records read per thread ahead of the oldest unwritten one: room for the others to work
# while a slow record holds up the writing (16 kept a heavy-tailed run as fast as unordered).
READ_AHEAD = 16


def run(
    in_path: Path,
    out_path: Path,
    work: Worker,
    *,
    concurrency: int,
    progress: bool = True,
    stop_after: int = 0,
    backend: str = "the backend",
) -> Summary:
    """Stream IN through ``work`` with ``concurrency`` threads, appending results to OUT.

    IN is read twice: once to admit every line and group the records by source
    (``schedule``), then record by record in that order. Records are written in it: one
    that finishes early waits for those before it, and at most ``READ_AHEAD`` x
    ``concurrency`` records are read ahead of the oldest unwritten one (bounded memory
    however big IN is). A run that completes or stops puts OUT in IN's order if it is not
    (records grouped by source, or run again, were written later than their line).

    An error that every later record would share (``work`` raises it: bad credentials, a
    backend that cannot start) is written for its record and stops the run; so do
    ``stop_after`` records in a row that failed on the backend (0: never), and the first
    ``stop_after`` records all ending unverified on invalid answers from ``backend`` (they
    are made retryable failures in OUT). Nothing after that record is written, so a re-run
    runs it; records already running finish, and their model calls are counted.
    """
    if not in_path.is_file():
        raise InputError(f"cannot read input file {str(in_path)!r}")
    started = time.perf_counter()
    writer = OutLog(out_path)
    summary = Summary(earlier_errors=writer.failed, stop_after=stop_after, backend=backend)
    intake = Intake(writer.done)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="conli-batch")
    queue: deque[tuple[Future[Record], Record]] = deque()  # read, not yet written: run order
    halt = threading.Event()  # a record raised: read no further
    bar = progress_bar(progress)
    task = bar.add_task("records", total=None)

    def write_ready(*, keep: int) -> None:
        """Write the finished records at the queue's head; wait while over ``keep`` queued."""
        while queue and not summary.stopped:
            future, record = queue[0]
            if future.cancelled() or (not future.done() and len(queue) <= keep):
                return
            queue.popleft()
            error = future.exception()  # waits for it
            written = future.result() if error is None else stopped_record(record, error)
            writer.write(written)
            summary.add(written)
            bar.advance(task)
            if error is not None:
                summary.stopped = summary.stopped or stop_reason(error)

    def watch(future: Future[Record]) -> None:
        if not future.cancelled() and future.exception() is not None:
            halt.set()

    try:
        planned, summary.skipped = schedule(in_path, intake)
        bar.update(task, total=len(planned))
        with bar, in_path.open("rb") as lines:
            for number, offset, given in planned:
                if summary.stopped or halt.is_set():
                    break
                item = read_at(lines, number, offset) if given is None else given
                if isinstance(item, str):  # IN changed since it was admitted
                    item = line_error(number, item)
                    given = item
                future = pool.submit(work, item) if given is None else _finished(item)
                future.add_done_callback(watch)
                queue.append((future, item))
                write_ready(keep=READ_AHEAD * concurrency - 1)
            if summary.stopped or halt.is_set():
                for future, _ in queue:
                    future.cancel()  # not started: left out of OUT for a re-run
            write_ready(keep=0)
            if summary.stopped:
                pool.shutdown(wait=True)  # those running finish: their calls are counted
                _count_unwritten(queue, summary)
                settle_stop(writer, summary)
            writer.put_in_order(intake.line_of)
    except KeyboardInterrupt:
        summary.interrupted = True
        for future, _ in queue:
            future.cancel()
        write_ready(keep=sys.maxsize)  # the finished ones at the head: keep them
    finally:
        pool.shutdown(wait=not summary.interrupted, cancel_futures=True)
        writer.close()
        summary.seconds = time.perf_counter() - started
    return summary


def _count_unwritten(queue: deque[tuple[Future[Record], Record]], summary: Summary) -> None:
    """Count the calls of the records that ran, or began to, but were not written."""
    for future, record in queue:
        if future.cancelled():
            continue  # never started
        error = future.exception()
        summary.add_unwritten(future.result() if error is None else stopped_record(record, error))


def _finished(record: Record) -> Future[Record]:
    """A future already holding ``record`` (an error record), to queue in IN's order."""
    future: Future[Record] = Future()
    future.set_result(record)
    return future
