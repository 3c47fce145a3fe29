"""The records of ``conli batch``, shared by both engines: IN, OUT, and what a run did.

``read_records``/``parse_line`` read IN's lines, ``Intake`` decides what each becomes,
``OutLog`` resumes from OUT, appends to it and puts it in IN's order at the end of a run,
``Summary`` counts a run (and says when to stop it), and
``CountingBackend`` counts the model calls of each record, failed ones too.
``conli.batch.local`` (threads) and ``conli.batch.ray_engine`` (Ray actors) do the scheduling.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from conli.agents.structured import INVALID_ANSWER
from conli.backends.base import Backend, Completion, Request
from conli.errors import EXIT_INTERRUPTED, OutputParseError, boundary
from conli.files import LogAppender, atomic_writer, json_line, read_log

Record = dict[str, Any]
T = TypeVar("T")
Admission = Literal["skip", "error", "run"]
STOP_SETTING = "CONLI_BATCH_STOP_AFTER_FAILURES"


# --- what a run did -----------------------------------------------------------------------


@dataclass
class Summary:
    """What one run did; resumed records are counted in ``skipped``, not in the totals.

    ``earlier_errors``: failed records OUT already held (kept, not run again), so the exit
    code and the summary speak for all of OUT. ``stop_after``: stop the run once that many
    records in a row failed retryably (the backend could not be used), or once the run's
    first that many all ended unverified on invalid answers (``invalid_answer``: the backend
    answers, but never as asked); 0 never. ``backend`` names it in that message. Every
    model call is counted, those of records that ran but were not written too
    (``in_flight``: the run stopped before their turn).
    """

    processed: int = 0
    skipped: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    earlier_errors: int = 0
    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    stopped: str | None = None  # the error that ended the run early
    stop_after: int = 0
    failing_in_a_row: int = 0
    backend: str = "the backend"
    in_flight: int = 0
    unanswered: list[str] = field(default_factory=list)  # keys: the first, invalid answers
    unanswered_outcomes: Counter[str] = field(default_factory=Counter)  # and their buckets
    answered: bool = False  # a record got a valid answer: the invalid-answer stop is off

    @property
    def exit_code(self) -> int:
        """0: every record in OUT ok; 1: some failed (now or before); 3 stopped; 130 Ctrl-C."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.stopped:
            return 3
        return 1 if self.errors_in_out else 0

    @property
    def errors_in_out(self) -> int:
        """Failed records in OUT after the run: those it held before, and this run's."""
        return self.earlier_errors + self.errors

    def add(self, record: Record) -> None:
        """Count one written record."""
        self.processed += 1
        self._count_calls(record)
        if not record.get("ok"):
            self.errors += 1
            self._count_failure(record)
            return
        self.failing_in_a_row = 0
        self.outcomes[outcome(record)] += 1
        self._count_answers(record)

    def add_unwritten(self, record: Record) -> None:
        """Count the calls of a record that ran but is not in OUT: the run stopped first."""
        if any(_calls_of(record)):
            self.in_flight += 1
            self._count_calls(record)

    def _count_calls(self, record: Record) -> None:
        calls, failed = _calls_of(record)
        self.calls, self.failed_calls = self.calls + calls, self.failed_calls + failed
        usage = (record.get("result") or {}).get("usage") or {}
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.cached_tokens += usage.get("cached_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)

    def _count_answers(self, record: Record) -> None:
        """Stop once the run's first ``stop_after`` records all ended on invalid answers.

        Only until a record gets a valid answer: a backend that answered as asked once is
        not misconfigured, and a weak model's odd invalid answer stays the ``unverified``
        verdict it is. A record that asked the model nothing says nothing either way.
        """
        if self.answered or not self.stop_after or not any(_calls_of(record)):
            return
        error = invalid_answer(record)
        if error is None:
            self.answered = True
            return
        self.unanswered.append(record_key(record))
        self.unanswered_outcomes[outcome(record)] += 1
        if len(self.unanswered) >= self.stop_after and not self.stopped:
            self.stopped = (f"the first {len(self.unanswered)} records all ended unverified: "
                            f"the backend {self.backend} answered, but never as asked (last: "
                            f"{error}); check that it is a chat model that can answer JSON "
                            f"({STOP_SETTING} sets how many)")

    def _count_failure(self, record: Record) -> None:
        """A retryable failure (the backend) adds to the run of them; bad input does not."""
        if not record.get("retryable"):
            return
        self.failing_in_a_row += 1
        if self.stop_after and self.failing_in_a_row >= self.stop_after and not self.stopped:
            error = record.get("error") or {}
            self.stopped = (f"{self.failing_in_a_row} records in a row failed on the backend "
                            f"(last: {error.get('type')}: {error.get('message')}; "
                            f"{STOP_SETTING} sets how many)")

    def format(self) -> str:
        """Format the end-of-run summary as a few human-readable lines."""
        rate = self.processed / self.seconds if self.seconds else 0.0
        state = "interrupted" if self.interrupted else "stopped" if self.stopped else "done"
        errors = f"errors {self.errors_in_out}"
        if self.earlier_errors:
            errors += f" ({self.errors} this run)"
        lines = [
            f"conli batch {state}: {self.processed} records in {self.seconds:.1f}s ({rate:.2f}/s); "
            f"{self.skipped} already in OUT",
            "  " + " · ".join(
                [f"{name} {count}" for name, count in sorted(self.outcomes.items())] + [errors]
            ),
            f"  {self.calls} model calls answered, {self.failed_calls} failed; "
            f"{self.prompt_tokens:,} prompt tokens ({self.cached_tokens:,} cached), "
            f"{self.completion_tokens:,} generated",
        ]
        if self.in_flight:
            lines.append(f"  records running when the run stopped: {self.in_flight} (their "
                         "calls are counted above; the records are left out of OUT)")
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


def _calls_of(record: Record) -> tuple[int, int]:
    """A record's model calls: (answered, failed), from its result or its failure's tally."""
    if record.get("ok"):
        usage = record["result"].get("usage") or {}
        return usage.get("calls", 0), usage.get("failed_attempts", 0)
    usage = record.get("usage") or {}
    return usage.get("calls", 0), usage.get("failed_calls", 0)


def invalid_answer(record: Record) -> str | None:
    """The error an ok record ended unverified on, if only invalid model answers made it so.

    ``agents.structured`` re-asks once for an answer that does not validate, then records
    an ``INVALID_ANSWER`` error where the answer was wanted: on each judgement it leaves
    unverified, on the judge's result. A record counts when nothing in it was verified
    and every error it shows is such an answer; one unverified for another reason does not.
    """
    result = record.get("result") or {}
    if "verdict" in result:  # check, rewrite
        verified = result["verdict"] != "unverified"
        errors = [j.get("error") for s in result.get("sentences", [])
                  for j in s.get("judgements", []) if j.get("verdict") == "unverified"]
    else:  # judge
        judge = result.get("judge") or {}
        verified = judge.get("status") != "unverified" and not _nothing_verified(judge)
        errors = [judge.get("error")]
    if verified or not errors or not all(e and INVALID_ANSWER in e for e in errors):
        return None
    return str(errors[-1])


def _nothing_verified(judge: Record) -> bool:
    """The grounded judge scored from sentences every one of which is unverified."""
    checked = [s for s in (judge.get("audit") or {}).get("sentences", []) if s.get("checked")]
    return bool(checked) and all(s.get("verdict") == "unverified" for s in checked)


def settle_stop(log: OutLog, summary: Summary) -> None:
    """After a stop on invalid answers, make those records retryable failures in OUT.

    They were written ``ok`` (unverified), so a re-run would keep them; stopped as a failing
    backend's run is, they run again once the backend is fixed.
    """
    if summary.stop_after and len(summary.unanswered) >= summary.stop_after:
        log.fail(summary.unanswered, OutputParseError(
            f"the backend {summary.backend} never answered as asked; the run was stopped"))
        summary.errors += len(summary.unanswered)
        summary.outcomes -= summary.unanswered_outcomes


# --- failed records -----------------------------------------------------------------------


class StopRun(Exception):
    """A failure every later record would share: the run writes ``record`` and stops."""

    def __init__(self, record: Record, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.record = record
        self.reason = f"{type(cause).__name__}: {cause}"


def given_points(record: Record) -> Record:
    """``{"points": ...}`` when the input record carries points, for its OUT record; else ``{}``."""
    return {"points": record["points"]} if record.get("points") is not None else {}


def stopped_record(record: Record, error: BaseException) -> Record:
    """The OUT record of the input record whose error stopped the run (``work`` raised)."""
    if isinstance(error, StopRun):
        return error.record
    return {"id": record["id"], "source": record.get("source"),
            "response": record.get("response"), **given_points(record), **failure(error)}


def failure(error: BaseException) -> Record:
    """The ``ok: false`` part of a record; ``retryable`` when a re-run may cure it."""
    return {"ok": False, "retryable": boundary(error).exit_code != 2,
            "error": {"type": type(error).__name__, "message": str(error)}}


def stop_reason(error: BaseException) -> str:
    """How the summary names the error that stopped the run."""
    return error.reason if isinstance(error, StopRun) else f"{type(error).__name__}: {error}"


# --- counting a record's model calls, failed ones too -------------------------------------


class CallTally:
    """The model calls one record made: answered, and failed (retried or not)."""

    def __init__(self) -> None:
        self.calls = 0
        self.failed = 0
        self._lock = threading.Lock()

    def count(self, *, ok: bool) -> None:
        """Count one call; a record's calls may run in several threads."""
        with self._lock:
            if ok:
                self.calls += 1
            else:
                self.failed += 1

    def usage(self) -> Record:
        """``{"usage": {...}}`` for a failed record's OUT line, or ``{}`` if it made no call."""
        if not (self.calls or self.failed):
            return {}
        return {"usage": {"calls": self.calls, "failed_calls": self.failed}}


# The tally of the record being run; the pipeline's threads copy the context, so share it.
_TALLY: ContextVar[CallTally | None] = ContextVar("conli_batch_tally", default=None)


def tallied(tally: CallTally, fn: Callable[[], T]) -> T:
    """``fn()`` with every call through a ``CountingBackend`` counted in ``tally``."""
    token = _TALLY.set(tally)
    try:
        return fn()
    finally:
        _TALLY.reset(token)


class CountingBackend:
    """``inner``, with each call counted in the running record's ``CallTally``.

    A record that fails carries no result and so no usage; this is how its failed calls
    still reach the summary. Everything else (optional reading methods) is ``inner``'s.
    """

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.capabilities = inner.capabilities

    def complete(self, request: Request) -> Completion:
        """``inner.complete``, counted."""
        tally = _TALLY.get()
        try:
            completion = self.inner.complete(request)
        except BaseException:
            if tally is not None:
                tally.count(ok=False)
            raise
        if tally is not None:
            tally.count(ok=True)
        return completion

    def close(self) -> None:
        """Close ``inner``."""
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


# --- OUT: resume, append, order -----------------------------------------------------------


def record_key(record: Record) -> str:
    """The key a record is resumed and de-duplicated by: its id as JSON, else its line.

    JSON keeps the string ``"1"`` and the integer ``1`` apart; a line that has no usable id
    is keyed by its line number, which no id can spell.
    """
    if record.get("id") is None:
        return f"line {record.get('line')}"
    return json.dumps(record["id"])


class OutLog:
    """OUT as a run sees it: the keys it holds for good (in file order), and its appender.

    Opening it cuts off a torn or garbled last line. A record that failed for a reason a
    re-run can cure (``retryable``: the backend could not be used) is not done: it is
    dropped from OUT, rewritten whole, and runs again.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        records = read_log(path, _as_record)
        kept = [r for r in records if not (r.get("ok") is False and r.get("retryable"))]
        if len(kept) != len(records):
            _rewrite(path, kept)
        self.keys = [record_key(r) for r in kept]
        self.done = set(self.keys)
        self.failed = sum(1 for r in kept if r.get("ok") is False)  # held for good
        self._writer: LogAppender | None = LogAppender(path)

    def write(self, record: Record) -> None:
        """Append one record (one fsynced line)."""
        if self._writer is None:
            raise ValueError(f"{self.path} is closed")
        self._writer.write(record)
        self.keys.append(record_key(record))

    def fail(self, keys: list[str], error: BaseException) -> None:
        """Rewrite the records of ``keys`` as ``error``'s failures (atomic), OUT closed after."""
        self.close()
        wanted = set(keys)
        records = [{**{k: v for k, v in r.items() if k not in ("ok", "result")},
                    **failure(error), "usage": dict(zip(("calls", "failed_calls"), _calls_of(r),
                                                        strict=True))}
                   if record_key(r) in wanted else r for r in read_log(self.path, _as_record)]
        _rewrite(self.path, records)

    def close(self) -> None:
        """Close the appender, if one was opened."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def put_in_order(self, line_of: Callable[[str], int | None]) -> bool:
        """Rewrite OUT in IN's order if it is not (records run again were appended last).

        Keys IN no longer holds keep their order, after the rest. Atomic: a crash leaves
        OUT as it was. Returns whether OUT was rewritten.
        """
        self.close()
        places = [_place(line_of(key), index) for index, key in enumerate(self.keys)]
        if places == sorted(places):
            return False
        records = read_log(self.path, _as_record)
        places = [_place(line_of(record_key(r)), index) for index, r in enumerate(records)]
        records = [record for _, record in sorted(zip(places, records, strict=True),
                                                  key=lambda pair: pair[0])]
        _rewrite(self.path, records)
        self.keys = [record_key(record) for record in records]
        return True


def _place(line: int | None, index: int) -> tuple[int, int]:
    """Where a record goes: by its IN line; one IN no longer holds, after, as it was."""
    return (0, line) if line is not None else (1, index)


def _rewrite(path: Path, records: list[Record]) -> None:
    with atomic_writer(path) as handle:
        handle.writelines(json_line(r).decode("utf-8") for r in records)


def _as_record(value: Any) -> Record:
    if not isinstance(value, dict) or ("id" not in value and "line" not in value):
        raise ValueError("not a result record")
    return value


# --- IN: stream ---------------------------------------------------------------------------


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


def _usable_id(value: Any) -> bool:
    """Ids are strings or integers; anything else is refused."""
    return not isinstance(value, bool) and isinstance(value, str | int)


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

    def line_of(self, key: str) -> int | None:
        """The IN line a key was first seen on (None: not seen), for OUT's order."""
        return self._first_line.get(key)
