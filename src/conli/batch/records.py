"""The records of ``conli batch``, shared by both engines: IN's lines and OUT's.

``read_records``/``parse_line`` read IN's lines, ``Intake`` decides what each becomes,
``schedule`` orders the records to run so that those sharing a source run together,
``OutLog`` resumes from OUT, appends to it and puts it in IN's order at the end of a run;
``failure`` and ``stopped_record`` are the lines of records that failed. What a run did is
``conli.batch.summary``; a record's model calls are counted by ``conli.batch.tally``.
``conli.batch.local`` (threads) and ``conli.batch.ray_engine`` (Ray actors) do the scheduling.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Literal

from conli.errors import boundary
from conli.files import LogAppender, atomic_writer, json_line, read_log
from conli.run.table import canonical

Record = dict[str, Any]
Admission = Literal["skip", "error", "run"]


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


def calls_of(record: Record) -> tuple[int, int]:
    """A record's model calls: (answered, failed), from its result or its failure's tally."""
    if record.get("ok"):
        usage = record["result"].get("usage") or {}
        return usage.get("calls", 0), usage.get("failed_attempts", 0)
    usage = record.get("usage") or {}
    return usage.get("calls", 0), usage.get("failed_calls", 0)


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
                    **failure(error), "usage": dict(zip(("calls", "failed_calls"), calls_of(r),
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


# --- IN: stream, and the order records run in ----------------------------------------------


def read_records(path: Path) -> Iterator[tuple[int, Record | str]]:
    """Yield ``(line number, record)``, or ``(line number, error message)`` for a bad line."""
    for number, _offset, line in _lines(path):
        yield number, parse_line(number, line)


def _lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """Each non-empty line of ``path``: its number, its byte offset and its bytes."""
    with path.open("rb") as handle:
        offset = 0
        for number, line in enumerate(handle, 1):
            if line.strip():
                yield number, offset, line
            offset += len(line)


def parse_line(number: int, line: bytes) -> Record | str:
    """One non-empty input line as a record, or the message saying why it cannot be one.

    RAGAS' and DeepEval's field names are read as conli's (``run.table.canonical``).
    """
    try:
        record = json.loads(line)
    except ValueError as exc:
        return f"line {number} is not valid JSON (UTF-8): {exc}"
    if not isinstance(record, dict):
        return f"line {number} is not a JSON object"
    if not _usable_id(record.get("id")):
        return f"line {number} has no usable id (a string or an integer)"
    return canonical(record)


def read_at(handle: BinaryIO, number: int, offset: int) -> Record | str:
    """Line ``number`` of the open IN (it starts at byte ``offset``), read by ``parse_line``."""
    handle.seek(offset)
    return parse_line(number, handle.readline())


# A line to write, in the order it runs: (IN line, byte offset, its error record or None to run)
Planned = tuple[int, int, Record | None]


def source_key(record: Record) -> bytes:
    """A digest of a record's source (its text, or its chunks): equal for records sharing it."""
    text = json.dumps(record.get("source"), sort_keys=True)  # ASCII: any lone surrogate too
    return hashlib.blake2b(text.encode("ascii"), digest_size=16).digest()


def schedule(path: Path, intake: Intake) -> tuple[list[Planned], int]:
    """Admit every line of IN, in its order; return the lines to write in the order to run them.

    Records that share a source run one after another, so a backend whose prompt cache
    holds one prompt (the embedded model's slot) reads that source once for all of them,
    not once a record: groups in the order of their first record, each group in IN's order.
    A line that runs no check (an error record) keeps its own place. Only line numbers and
    offsets are held, never the records, so memory stays small whatever IN's size. Also
    returns how many lines were skipped (already in OUT).
    """
    groups: dict[bytes | int, list[Planned]] = {}
    skipped = 0
    for number, offset, line in _lines(path):
        admission, record = intake.admit(number, parse_line(number, line))
        if admission == "skip":
            skipped += 1
            continue
        key = source_key(record) if admission == "run" else number
        groups.setdefault(key, []).append((number, offset,
                                           None if admission == "run" else record))
    return [planned for group in groups.values() for planned in group], skipped


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
            return "error", line_error(number, bad)
        assert isinstance(item, dict)
        return "run", item

    def line_of(self, key: str) -> int | None:
        """The IN line a key was first seen on (None: not seen), for OUT's order."""
        return self._first_line.get(key)


def line_error(number: int, message: str) -> Record:
    """The OUT record of IN line ``number``, which cannot run: unreadable, or a repeated id."""
    return {"id": None, "line": number, "ok": False, "retryable": False,
            "error": {"type": "InputError", "message": message}}
