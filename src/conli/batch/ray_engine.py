"""``conli batch --engine ray``: the same batch as a Ray Data pipeline on a Ray cluster.

Pass 1, on the driver, streams IN once (a local path, or a URI pyarrow reads: ``s3://``,
``gs://``, ``hdfs://``) and decides with the local engine's ``Intake`` what each line
becomes: skipped (its key is in OUT), an error record (unreadable, repeated id) or run;
so resume and bad lines behave exactly as locally. Pass 2 reads IN with Ray Data, keeping
only the lines to run, in blocks of about one actor call's worth of records, and maps them
through a fixed pool of actors, each holding one backend and one ``make_worker`` worker
and running ``concurrency`` records at a time in threads. The driver streams the results
back and is OUT's only writer: it skips any key already written, so a block that Ray runs
again after its actor died (Ray restarts the actor and retries the task) is written once.
Ray Data keeps the blocks in IN's order and the driver writes pass 1's error records in
their place, so OUT is in IN's order, as locally. A run that stops sets a flag
(``RunFlag``): the reader reads on no further and the actors start no further record,
while those already running finish, so the summary counts every model call, as locally.

The actors and what they are sent are ``conli.batch.ray_actors``; this module is the driver.
Ray is imported only in these two; ``conli.cli.batch`` imports this one for ``--engine ray``
alone, and both build on ``conli.batch.work``, never on ``conli.batch.local``.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import ray
import ray.data
from ray.data.datasource import FileBasedDatasource

from conli.batch.ray_actors import (
    CALLS_PER_ACTOR,
    ActorJob,
    CheckActor,
    RunFlag,
    actor_job,
    flag_is_set,
)
from conli.batch.records import (
    Intake,
    OutLog,
    Record,
    parse_line,
    record_key,
)
from conli.batch.summary import Summary, settle_stop
from conli.batch.work import check_paths, progress_bar
from conli.config import Settings
from conli.errors import BackendUnavailableError, ConfigError, InputError
from conli.files import ensure_appendable

_CHUNK = 1 << 20  # IN is read in 1 MiB chunks, whatever its size
_ROWS_PER_READ = 4096  # rows the reader hands on at a time; Ray Data cuts them to size


# --- IN: one Ray Data source, numbered exactly as the local engine numbers lines -----------


class JsonlLines(FileBasedDatasource):
    """IN's non-empty lines as rows ``{line, text}``: split on newline bytes, numbered from 1.

    The same lines and numbers as ``conli.batch.records.read_records``, streamed in chunks, so an
    error record names the same line whichever engine wrote it. With ``wanted`` (a bitmap
    of line numbers) only those lines are read out; once ``stop`` is set, no more.
    """

    def __init__(self, path: str, *, wanted: bytes | None = None, stop: Any = None) -> None:
        super().__init__(path)
        self._wanted = wanted
        self._stop = stop

    def _read_stream(self, f: Any, path: str) -> Iterator[pa.Table]:
        numbers: list[int] = []
        texts: list[bytes] = []
        for number, line in _numbered_lines(f):
            if line.strip() and (self._wanted is None or _marked(self._wanted, number)):
                numbers.append(number)
                texts.append(line)
                if len(numbers) >= _ROWS_PER_READ:
                    yield _lines_table(numbers, texts)
                    numbers, texts = [], []
                    if flag_is_set(self._stop):
                        return
        if numbers:
            yield _lines_table(numbers, texts)


def _numbered_lines(f: Any) -> Iterator[tuple[int, bytes]]:
    """``enumerate(binary file, 1)`` over a pyarrow stream: lines keep their newline."""
    number, rest = 0, b""
    while chunk := f.read(_CHUNK):
        parts = (rest + chunk).split(b"\n")
        rest = parts.pop()
        for part in parts:
            number += 1
            yield number, part + b"\n"
    if rest:
        yield number + 1, rest


def _lines_table(numbers: list[int], texts: list[bytes]) -> pa.Table:
    return pa.table({"line": pa.array(numbers, pa.int64()), "text": pa.array(texts, pa.binary())})


def _scan(in_uri: str) -> Iterator[tuple[int, Record | str, int]]:
    """Pass 1, on the driver: each non-empty line's record (or why it is unusable) and size."""
    try:
        if _is_uri(in_uri):
            filesystem, path = pafs.FileSystem.from_uri(in_uri)
        else:
            filesystem, path = pafs.LocalFileSystem(), in_uri
        stream = filesystem.open_input_stream(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"cannot read input file {in_uri!r}: {exc}") from exc
    with stream:
        for number, line in _numbered_lines(stream):
            if line.strip():
                yield number, parse_line(number, line), len(line)


def _mark(bitmap: bytearray, number: int) -> None:
    if number >> 3 >= len(bitmap):
        bitmap.extend(bytes((number >> 3) + 1 - len(bitmap)))
    bitmap[number >> 3] |= 1 << (number & 7)


def _marked(bitmap: bytes, number: int) -> bool:
    return number >> 3 < len(bitmap) and bool(bitmap[number >> 3] & (1 << (number & 7)))


# --- the driver ---------------------------------------------------------------------------


@contextmanager
def ray_session(address: str | None) -> Iterator[None]:
    """Use the caller's Ray, else join ``address``, else start a local Ray; leave it after."""
    if ray.is_initialized():
        yield
        return
    ray.init(address=address or "local", include_dashboard=False,
             logging_level=logging.WARNING)
    try:
        yield
    finally:
        ray.shutdown()


def run_ray(
    in_uri: str,
    out_path: Path,
    job: ActorJob,
    *,
    actors: int = 1,
    progress: bool = True,
) -> Summary:
    """Run IN through ``actors`` actors on the current Ray session, appending results to OUT.

    Records are written in IN's order, as locally: Ray Data keeps the blocks' order, and
    the error records of pass 1 wait for their place among the results.

    An error every later record would share (bad credentials, a backend that cannot start)
    is written for its record and stops the run, as locally, and so do
    ``batch_stop_after_failures`` records in a row that failed on the backend; an error
    that kept the actors from building their backend is raised (``ConfigError`` or
    ``BackendUnavailableError``).
    """
    started = time.perf_counter()
    writer = OutLog(out_path)
    summary = Summary(earlier_errors=writer.failed, backend=job.settings.llm,
                      stop_after=job.settings.batch_stop_after_failures)
    flag = RunFlag.remote()  # type: ignore[attr-defined]
    intake = Intake(writer.done)
    written: set[str] = set()
    bar = progress_bar(progress)
    _quiet_ray_data()

    def emit(record: Record) -> bool:
        key = record_key(record)
        if key in written or key in intake.done:
            return False  # a retried block's record, already in OUT
        written.add(key)
        writer.write(record)
        summary.add(record)
        bar.advance(task)
        return True

    try:
        with bar:
            task = bar.add_task("records", total=None)
            wanted = bytearray()
            held: deque[Record] = deque()  # pass 1's error records, to write in their place
            to_run = to_run_bytes = 0
            for number, item, size in _scan(in_uri):
                admission, record = intake.admit(number, item)
                if admission == "skip":
                    summary.skipped += 1
                elif admission == "error":
                    held.append(record)
                else:
                    _mark(wanted, number)
                    to_run += 1
                    to_run_bytes += size
            bar.update(task, total=len(held) + to_run)
            if to_run:
                block_bytes = _block_rows(job) * to_run_bytes // max(to_run, 1)
                rows = _pass_two(in_uri, bytes(wanted), job, actors=actors,
                                 block_bytes=block_bytes, flag=flag)
                for row in rows:
                    if row["broken"]:
                        error_class = ConfigError if row["broken"] == "2" else \
                            BackendUnavailableError
                        raise error_class(f"the Ray actors could not start: {row['stop']}")
                    while held and held[0]["line"] < int(row["line"]):
                        emit(held.popleft())
                    if emit(json.loads(row["out"])) and row["stop"] and not summary.stopped:
                        summary.stopped = row["stop"]
                    if summary.stopped:
                        flag.set.remote()
                        _count_unwritten(rows, summary)
                        break
            if summary.stopped:
                settle_stop(writer, summary)
            else:
                while held:
                    emit(held.popleft())
                writer.put_in_order(intake.line_of)
    except KeyboardInterrupt:
        summary.interrupted = True
    finally:
        writer.close()
        summary.seconds = time.perf_counter() - started
    return summary


def _count_unwritten(rows: Iterator[dict[str, Any]], summary: Summary) -> None:
    """The rest of the rows after a stop: none is written, each that ran has its calls counted.

    The flag is set, so only the records already running come back with a line.
    """
    for row in rows:
        if row["out"] and not row["broken"]:
            summary.add_unwritten(json.loads(row["out"]))


def _block_rows(job: ActorJob) -> int:
    """Records per block: one actor call's worth of threads, so each block is soon done."""
    return job.concurrency or job.settings.batch_concurrency or job.settings.max_concurrency


def _pass_two(in_uri: str, wanted: bytes, job: ActorJob, *, actors: int,
              block_bytes: int, flag: Any) -> Iterator[dict[str, Any]]:
    """The results of the wanted lines of IN, as the actors finish their blocks.

    Blocks of about ``block_bytes`` (one actor call's worth of records) spread the records
    over the actors. The read needs no CPU, so the actors may hold every CPU there is.
    Once ``flag`` is set, the read ends and no record starts.
    """
    dataset = (
        _read(JsonlLines(in_uri, wanted=wanted, stop=flag), in_uri)
        .map_batches(
            CheckActor,
            fn_constructor_kwargs={"job": job, "run_flag": flag},
            batch_size=None,
            compute=ray.data.ActorPoolStrategy(
                size=actors, max_concurrent_calls_per_actor=CALLS_PER_ACTOR,
                max_tasks_in_flight_per_actor=CALLS_PER_ACTOR,
                enable_true_multi_threading=True),
            num_cpus=job.cpus_per_actor,
        )
    )
    dataset.context.target_max_block_size = max(block_bytes, 1)
    dataset.context.execution_options.preserve_order = True  # OUT in IN's order
    yield from _rows(dataset)


def _read(source: JsonlLines, in_uri: str) -> ray.data.Dataset:
    """Read IN; a local path is read on the driver's node, where it was found."""
    here = ray.get_runtime_context().get_node_id()
    selector = None if _is_uri(in_uri) else {"ray.io/node-id": here}
    dataset: ray.data.Dataset = ray.data.read_datasource(source, num_cpus=0,
                                                         label_selector=selector)
    return dataset


def _rows(dataset: ray.data.Dataset) -> Iterator[dict[str, Any]]:
    """Stream a dataset's rows; stopping early stops its execution."""
    rows = iter(dataset.iter_rows())
    try:
        yield from rows
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()


def _quiet_ray_data() -> None:
    """Our progress bar and summary replace Ray Data's own bars and execution logs."""
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)


# --- command line -------------------------------------------------------------------------


def _is_uri(given: str) -> bool:
    return "://" in given and bool(urlparse(given).scheme)


def run_batch_ray(args: argparse.Namespace, settings: Settings) -> Summary:
    """``conli batch --engine ray``: check the flags, join or start Ray, run."""
    actors = 1 if args.actors is None else args.actors
    if actors < 1:
        raise InputError("--actors must be at least 1")
    cpus = 1.0 if args.cpus_per_actor is None else args.cpus_per_actor
    if cpus <= 0:
        raise InputError("--cpus-per-actor must be above 0")
    if _is_uri(args.input):
        ensure_appendable(args.output)
        in_uri = args.input
    elif (args.address or "").startswith("ray://"):
        raise InputError("through Ray Client (ray://) IN must be a URI the cluster reads, "
                         "e.g. s3://bucket/in.jsonl")
    else:
        check_paths(Path(args.input), args.output)
        in_uri = str(Path(args.input).resolve())
    job = actor_job(settings, args.mode, with_judge=args.judge, concurrency=args.concurrency,
                     cpus_per_actor=cpus)
    with ray_session(args.address):
        return run_ray(in_uri, args.output, job, actors=actors, progress=not args.no_progress)
