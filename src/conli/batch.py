"""``conli batch IN.jsonl OUT.jsonl``: check many records, concurrently and resumably.

IN holds one JSON object per line with ``id``, ``source`` and ``response`` (optionally
``question``, and ``points`` the response must cover: a list of strings or
``{perspective: [strings]}``). Each result is
appended to OUT as one JSON line, flushed and fsynced as soon as it is done, so a crash or
Ctrl-C loses no finished record; re-running the same command skips ids already in OUT
(dropping a torn last line first). A record that fails is written with its error.

Two engines share everything but the scheduling: ``--engine local`` (threads in this
process, ``run``) and ``--engine ray`` (an actor pool on a Ray cluster, ``conli.batch_ray``,
imported only when asked for). Both decide what each input line becomes with ``Intake``,
run records with ``make_worker`` and write OUT with one ``LogAppender``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from conli.backends import get_backend
from conli.backends.base import Backend
from conli.config import Settings
from conli.errors import (
    EXIT_INTERRUPTED,
    AuthenticationError,
    BackendUnavailableError,
    InputError,
    ModelStoreError,
    boundary,
)
from conli.files import LogAppender, atomic_writer, ensure_appendable, json_line, read_log
from conli.frontdoor import (
    MODES,
    Mode,
    add_session_flags,
    judge_only,
    mode_settings,
    session_settings,
)
from conli.inputs import check_input
from conli.pipeline import Checker

Record = dict[str, Any]
Worker = Callable[[Record], Record]
Engine = Literal["local", "ray"]
ENGINES: tuple[Engine, ...] = ("local", "ray")


@dataclass
class Summary:
    """What one run did; resumed records are counted in ``skipped``, not in the totals."""

    processed: int = 0
    skipped: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    stopped: str | None = None  # the error that ended the run early

    def add(self, record: Record) -> None:
        """Count one written record."""
        self.processed += 1
        if not record.get("ok"):
            self.errors += 1
            return
        self.outcomes[outcome(record)] += 1
        usage = record["result"].get("usage", {})
        self.calls += usage.get("calls", 0)
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.cached_tokens += usage.get("cached_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)

    def format(self) -> str:
        """Format the end-of-run summary as a few human-readable lines."""
        rate = self.processed / self.seconds if self.seconds else 0.0
        state = "interrupted" if self.interrupted else "stopped" if self.stopped else "done"
        lines = [
            f"conli batch {state}: {self.processed} records in {self.seconds:.1f}s ({rate:.2f}/s); "
            f"{self.skipped} already in OUT",
            "  " + " · ".join(
                [f"{name} {count}" for name, count in sorted(self.outcomes.items())]
                + [f"errors {self.errors}"]
            ),
            f"  {self.calls} model calls, {self.prompt_tokens:,} prompt tokens "
            f"({self.cached_tokens:,} cached), {self.completion_tokens:,} generated",
        ]
        if self.stopped:
            lines.append(f"  stopped early: {self.stopped}; fix it and re-run to resume")
        if self.interrupted:
            lines.append("  re-run the same command to resume")
        return "\n".join(lines)


def outcome(record: Record) -> str:
    """Name the summary bucket of a successful record: its verdict, or its judge score.

    Scores are bucketed to the rubric's integers (a distribution's mean is continuous).
    """
    result = record["result"]
    if "verdict" in result:
        return str(result["verdict"])
    judged = result.get("judge", {})
    score = judged.get("score")
    return f"score {int(score + 0.5)}" if score else "unverified"


# --- OUT: resume --------------------------------------------------------------------------


def record_key(record: Record) -> str:
    """The key a record is resumed and de-duplicated by: its id as JSON, else its line.

    JSON keeps the string ``"1"`` and the integer ``1`` apart; a line that has no usable id
    is keyed by its line number, which no id can spell.
    """
    if record.get("id") is None:
        return f"line {record.get('line')}"
    return json.dumps(record["id"])


def done_ids(out: Path) -> set[str]:
    """Keys of the records OUT holds for good; a torn or garbled last line is cut off.

    A record that failed for a reason a re-run can cure (``retryable``: the backend could
    not be used) is not done: it is dropped from OUT, rewritten whole, and runs again.
    """
    records = read_log(out, _as_record)
    kept = [r for r in records if not (r.get("ok") is False and r.get("retryable"))]
    if len(kept) != len(records):
        with atomic_writer(out) as handle:
            handle.writelines(json_line(r).decode("utf-8") for r in kept)
    return {record_key(r) for r in kept}


def _as_record(value: Any) -> Record:
    if not isinstance(value, dict) or ("id" not in value and "line" not in value):
        raise ValueError("not a result record")
    return value


def _usable_id(value: Any) -> bool:
    """Ids are strings or integers; anything else is refused."""
    return not isinstance(value, bool) and isinstance(value, str | int)


# --- IN: stream -------------------------------------------------------------------------


def count_lines(path: Path) -> int:
    """Non-empty lines, counted in 1 MiB chunks so any file size is fine."""
    count, last = 0, b"\n"
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def read_records(path: Path) -> Iterator[tuple[int, Record | str]]:
    """Yield ``(line number, record)``, or ``(line number, error message)`` for a bad line."""
    with path.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                yield number, parse_line(number, line)


def parse_line(number: int, line: bytes) -> Record | str:
    """One non-empty input line as a record, or the message saying why it cannot be one."""
    try:
        record = json.loads(line)
    except ValueError as exc:
        return f"line {number} is not valid JSON (UTF-8): {exc}"
    if not isinstance(record, dict):
        return f"line {number} is not a JSON object"
    if not _usable_id(record.get("id")):
        return f"line {number} has no usable id (a string or an integer)"
    return record


Admission = Literal["skip", "error", "run"]


class Intake:
    """Decides, in IN's line order, what each line becomes: skipped, an error record, or run.

    Both engines use it, so resume (keys in OUT are skipped), unreadable lines and repeated
    ids (error records, never retried) behave the same whichever engine runs the records.
    """

    def __init__(self, done: set[str]) -> None:
        self.done = done
        self._first_line: dict[str, int] = {}

    def admit(self, number: int, item: Record | str) -> tuple[Admission, Record]:
        """What line ``number`` (``parse_line``'s result) becomes, and its record."""
        key = f"line {number}" if isinstance(item, str) else json.dumps(item["id"])
        bad = item if isinstance(item, str) else None
        if bad is None and key in self._first_line:
            bad = f"line {number} repeats the id of line {self._first_line[key]}"
            key = f"line {number}"
        self._first_line.setdefault(key, number)
        if key in self.done:
            return "skip", {}
        if bad is not None:  # unreadable line or duplicate id: recorded, never retried
            return "error", {"id": None, "line": number, "ok": False, "retryable": False,
                             "error": {"type": "InputError", "message": bad}}
        assert isinstance(item, dict)
        return "run", item


# --- the work -----------------------------------------------------------------------------


def make_worker(
    settings: Settings, mode: Mode, backend: Backend, *, with_judge: bool = False
) -> Worker:
    """Build the function that turns one input record into its output record; it never raises."""
    run_settings = mode_settings(settings, mode, with_judge=with_judge)
    # judge mode needs the detectors only for the grounded judge
    checker = None if mode == "judge" and run_settings.judge_mode == "rubric" \
        else Checker(run_settings, backend=backend)

    def work(record: Record) -> Record:
        source, response = record.get("source"), record.get("response")
        out: Record = {"id": record["id"], "mode": mode, "source": source, "response": response,
                       **_given_points(record)}
        try:
            checked = check_input(
                source, response, question=record.get("question"), points=record.get("points"),
                max_source_chars=run_settings.max_source_chars,
                max_response_chars=run_settings.max_response_chars,
            )
            if mode == "judge" or checker is None:
                result: Any = judge_only(backend, checked, run_settings, checker)
            else:
                result = checker.run(checked)
        except Exception as exc:
            if _fatal(exc):
                raise  # ``run`` records it and stops: every later record would fail alike
            return {**out, **failure(exc)}
        return {**out, "ok": True, "result": result.model_dump(mode="json")}

    return work


def _given_points(record: Record) -> Record:
    """``{"points": ...}`` when the input record carries points, for its OUT record; else ``{}``."""
    return {"points": record["points"]} if record.get("points") is not None else {}


def stopped_record(record: Record, error: BaseException) -> Record:
    """The OUT record of the input record whose error stopped the run (``work`` raised)."""
    return {"id": record["id"], "source": record.get("source"),
            "response": record.get("response"), **_given_points(record), **failure(error)}


def failure(error: BaseException) -> Record:
    """The ``ok: false`` part of a record; ``retryable`` when a re-run may cure it."""
    return {"ok": False, "retryable": boundary(error).exit_code != 2,
            "error": {"type": type(error).__name__, "message": str(error)}}


def _fatal(error: BaseException) -> bool:
    """A failure every later record would share: stop the run instead of repeating it."""
    return isinstance(error, AuthenticationError | BackendUnavailableError | ModelStoreError)


class _RateColumn(ProgressColumn):
    """Records per second over rich's recent window."""

    def render(self, task: Task) -> Text:
        return Text(f"{task.speed or 0.0:.2f} rec/s", style="progress.data.speed")


def progress_bar(enabled: bool) -> Progress:
    """The stderr progress bar both engines show: records done, rate and ETA."""
    return Progress(
        TextColumn("[bold]conli batch"), BarColumn(), MofNCompleteColumn(), _RateColumn(),
        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
        console=Console(stderr=True), disable=not enabled,
    )


def run(
    in_path: Path,
    out_path: Path,
    work: Worker,
    *,
    concurrency: int,
    progress: bool = True,
) -> Summary:
    """Stream IN through ``work`` with ``concurrency`` threads, appending results to OUT.

    An error that every later record would share (``work`` raises it: bad credentials, a
    backend that cannot start) is written for its record and stops the run.
    """
    if not in_path.is_file():
        raise InputError(f"cannot read input file {str(in_path)!r}")
    started = time.perf_counter()
    summary = Summary()
    intake = Intake(done_ids(out_path))
    total = max(count_lines(in_path) - len(intake.done), 0)
    writer = LogAppender(out_path)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="conli-batch")
    pending: dict[Future[Record], Record] = {}
    bar = progress_bar(progress)
    task = bar.add_task("records", total=total)

    def emit(record: Record) -> None:
        writer.write(record)
        summary.add(record)
        bar.advance(task)

    def drain(block_until: int) -> None:
        while len(pending) > block_until:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                record = pending.pop(future)
                error = future.exception()
                if error is None:
                    emit(future.result())
                    continue
                emit(stopped_record(record, error))
                summary.stopped = f"{type(error).__name__}: {error}"

    try:
        with bar:
            for number, item in read_records(in_path):
                if summary.stopped:
                    break
                admission, record = intake.admit(number, item)
                if admission == "skip":
                    summary.skipped += 1
                elif admission == "error":
                    emit(record)
                else:
                    pending[pool.submit(work, record)] = record
                    drain(block_until=2 * concurrency - 1)  # bounded memory however big IN is
            drain(block_until=0)
            bar.update(task, total=bar.tasks[0].completed)  # skips made the estimate high
    except KeyboardInterrupt:
        summary.interrupted = True
        for future in [f for f in pending if f.done() and f.exception() is None]:
            writer.write(future.result())  # finished: keep them
            summary.add(future.result())
    finally:
        pool.shutdown(wait=not summary.interrupted, cancel_futures=True)
        writer.close()
        summary.seconds = time.perf_counter() - started
    return summary


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
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--engine", choices=ENGINES, default="local",
                        help="local: threads in this process; ray: an actor pool on Ray "
                             "(pip install 'conli[ray]')")
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

    0 every record ok, 1 some records failed, 3 the backend could not be used, 130
    interrupted; a batch that cannot start at all raises (2).
    """
    settings = session_settings(args, fix_coverage=True if args.fix_coverage else None)
    if args.concurrency is not None and args.concurrency < 1:
        raise InputError("--concurrency must be at least 1")
    if args.fix_coverage and args.mode != "rewrite":
        raise InputError("--fix-coverage needs --mode rewrite")
    if args.engine == "ray":
        from conli.batch_ray import run_batch_ray  # Ray is imported only for this engine

        summary = run_batch_ray(args, settings)
    else:
        given = [flag for flag, value in (("--address", args.address), ("--actors", args.actors),
                                          ("--cpus-per-actor", args.cpus_per_actor)) if value]
        if given:
            raise InputError(f"{', '.join(given)} needs --engine ray")
        summary = _run_local(args, settings)
    print(summary.format(), file=sys.stderr)
    return exit_code(summary)


def check_paths(in_path: Path, out_path: Path) -> None:
    """Refuse, before any work, an unreadable IN, IN as OUT, or an OUT that cannot grow."""
    if not in_path.is_file():
        raise InputError(f"cannot read input file {str(in_path)!r}")
    if in_path.resolve() == out_path.resolve():
        raise InputError("input and output must be different files")
    ensure_appendable(out_path)


def exit_code(summary: Summary) -> int:
    """0 every record ok, 1 some records failed, 3 stopped by the backend, 130 interrupted."""
    if summary.interrupted:
        return EXIT_INTERRUPTED
    if summary.stopped:
        return 3
    return 1 if summary.errors else 0


def _run_local(args: argparse.Namespace, settings: Settings) -> Summary:
    in_path = Path(args.input)
    check_paths(in_path, args.output)
    # Records run ``limit`` at a time; each backend itself caps its calls in flight (the
    # local model's lock, the hosted backends' shared limiter).
    backend = get_backend(settings.llm, settings)
    limit = args.concurrency or settings.batch_concurrency or backend.capabilities.max_concurrency
    try:
        work = make_worker(settings, args.mode, backend, with_judge=args.judge)
        return run(in_path, args.output, work, concurrency=limit, progress=not args.no_progress)
    finally:
        backend.close()
