"""``conli batch IN.jsonl OUT.jsonl``: check many records, concurrently and resumably.

IN holds one JSON object per line with ``id``, ``source`` and ``response`` (optionally
``question``, and ``points`` the response must cover: a list of strings or
``{perspective: [strings]}``). Each result is appended to OUT as one JSON line, in IN's
order, flushed and fsynced as soon as it and the records before it are done, so a crash or
Ctrl-C loses only records still running or waiting for an earlier one; re-running the same
command skips ids already in OUT (dropping a torn last line first). A record that fails is
written with its error.

Two engines share everything but the scheduling: ``--engine local`` (threads in this
process, ``run``) and ``--engine ray`` (an actor pool on a Ray cluster, ``conli.batch_ray``,
imported only when asked for). Both decide what each input line becomes with ``Intake``
and write OUT with one ``OutLog`` (``conli.batch_records``), and run records with
``make_worker`` (``conli.batch_work``).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from conli.backends import get_backend
from conli.batch_records import (
    Intake,
    OutLog,
    Record,
    Summary,
    count_lines,
    read_records,
    stop_reason,
    stopped_record,
)
from conli.batch_work import Worker, check_paths, make_worker, progress_bar
from conli.config import Settings
from conli.errors import EXIT_INTERRUPTED, ConfigError, InputError, install_hint
from conli.frontdoor import MODES, add_session_flags, session_settings

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
) -> Summary:
    """Stream IN through ``work`` with ``concurrency`` threads, appending results to OUT.

    Records are written in IN's order: one that finishes early waits for those before it,
    and IN is read at most ``READ_AHEAD`` x ``concurrency`` records ahead of the oldest
    unwritten one (bounded memory however big IN is). A run that completes puts OUT in IN's
    order if it is not (records run again were appended last).

    An error that every later record would share (``work`` raises it: bad credentials, a
    backend that cannot start) is written for its record and stops the run; so do
    ``stop_after`` records in a row that failed on the backend (0: never). Nothing after
    that record is written, so a re-run runs it.
    """
    if not in_path.is_file():
        raise InputError(f"cannot read input file {str(in_path)!r}")
    started = time.perf_counter()
    writer = OutLog(out_path)
    summary = Summary(earlier_errors=writer.failed, stop_after=stop_after)
    intake = Intake(writer.done)
    total = max(count_lines(in_path) - len(intake.done), 0)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="conli-batch")
    queue: deque[tuple[Future[Record], Record]] = deque()  # read, not yet written: IN's order
    halt = threading.Event()  # a record raised: read no further
    bar = progress_bar(progress)
    task = bar.add_task("records", total=total)

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
        with bar:
            for number, item in read_records(in_path):
                if summary.stopped or halt.is_set():
                    break
                admission, record = intake.admit(number, item)
                if admission == "skip":
                    summary.skipped += 1
                    continue
                future = pool.submit(work, record) if admission == "run" else _finished(record)
                future.add_done_callback(watch)
                queue.append((future, record))
                write_ready(keep=READ_AHEAD * concurrency - 1)
            if summary.stopped or halt.is_set():
                for future, _ in queue:
                    future.cancel()  # not started: left out of OUT for a re-run
            write_ready(keep=0)
            if not summary.stopped:
                writer.put_in_order(intake.line_of)
            bar.update(task, total=bar.tasks[0].completed)  # skips made the estimate high
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


def _finished(record: Record) -> Future[Record]:
    """A future already holding ``record`` (an error record), to queue in IN's order."""
    future: Future[Record] = Future()
    future.set_result(record)
    return future


# --- command line -------------------------------------------------------------------------


def add_batch_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``conli batch`` on the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "batch", help="check a JSONL file of {id, source, response} records, resumably",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("input", help="JSONL input: one {id, source, response} per line (with "
                        "--engine ray also a URI Ray can read, e.g. s3://bucket/in.jsonl)")
    parser.add_argument("output", type=Path, help="JSONL results; appended to, and resumed from")
    parser.add_argument("--mode", choices=MODES, default="rewrite",
                        help="check: detect only; rewrite: detect and rewrite; "
                             "judge: 1-5 score only")
    parser.add_argument("--judge", action="store_true",
                        help="in check/rewrite mode, also score before/after with the rubric judge")
    parser.add_argument("--fix-coverage", action="store_true",
                        help="in rewrite mode, add one checked sentence for each uncovered point "
                             "of a record's points")
    add_session_flags(parser)
    parser.add_argument("--concurrency", type=int,
                        help="records at once; with --engine ray, per actor (default: the "
                             "backend's)")
    parser.add_argument("--stop-after-failures", type=int, metavar="N",
                        help="stop (exit 3) after N records in a row failed on the backend; "
                             "0: never (default 5, or CONLI_BATCH_STOP_AFTER_FAILURES)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--engine", choices=ENGINES, default="local",
                        help="local: threads in this process; ray: an actor pool on Ray "
                             "(the [ray] extra)")
    ray = parser.add_argument_group("--engine ray")
    ray.add_argument("--address", help="Ray cluster to join: auto, HOST:PORT or ray://HOST:PORT "
                                       "(default: start a local Ray on this machine)")
    ray.add_argument("--actors", type=int, help="actors, each holding one backend (default 1)")
    ray.add_argument("--cpus-per-actor", type=float,
                     help="CPUs Ray reserves per actor; the embedded model runs that many "
                          "threads (default 1)")
    parser.set_defaults(handler=run_batch)
    return parser


def run_batch(args: argparse.Namespace) -> int:
    """Run the batch and return its exit code (see the README's table).

    0 every record in OUT ok, 1 some records in OUT failed (this run's or earlier ones),
    3 the backend could not be used, 130 interrupted; a batch that cannot start at all
    raises (2).
    """
    settings = session_settings(args, fix_coverage=True if args.fix_coverage else None,
                                batch_stop_after_failures=args.stop_after_failures)
    if args.concurrency is not None and args.concurrency < 1:
        raise InputError("--concurrency must be at least 1")
    if args.fix_coverage and args.mode != "rewrite":
        raise InputError("--fix-coverage needs --mode rewrite")
    if args.engine == "ray":
        try:
            from conli.batch_ray import run_batch_ray  # Ray is imported only for this engine
        except ImportError as exc:
            raise ConfigError(f"--engine ray needs Ray: {install_hint('ray')} ({exc})") from exc
        summary = run_batch_ray(args, settings)
    else:
        given = [flag for flag, value in (("--address", args.address), ("--actors", args.actors),
                                          ("--cpus-per-actor", args.cpus_per_actor)) if value]
        if given:
            raise InputError(f"{', '.join(given)} needs --engine ray")
        summary = _run_local(args, settings)
    print(summary.format(), file=sys.stderr)
    return exit_code(summary)


def exit_code(summary: Summary) -> int:
    """0 every record in OUT ok, 1 some failed (in this run or before), 3 stopped, 130 Ctrl-C."""
    if summary.interrupted:
        return EXIT_INTERRUPTED
    if summary.stopped:
        return 3
    return 1 if summary.errors_in_out else 0


def _run_local(args: argparse.Namespace, settings: Settings) -> Summary:
    in_path = Path(args.input)
    check_paths(in_path, args.output)
    # Records run ``limit`` at a time; each backend itself caps its calls in flight (the
    # local model's lock, the hosted backends' shared limiter).
    backend = get_backend(settings.llm, settings)
    limit = args.concurrency or settings.batch_concurrency or backend.capabilities.max_concurrency
    try:
        work = make_worker(settings, args.mode, backend, with_judge=args.judge)
        return run(in_path, args.output, work, concurrency=limit, progress=not args.no_progress,
                   stop_after=settings.batch_stop_after_failures)
    finally:
        backend.close()
