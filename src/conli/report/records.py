"""What ``conli report`` reads: ``conli batch`` records, or ``conli check --json`` results.

Values follow one another in the file: one per line (JSON Lines, as ``conli batch`` writes),
or indented over many lines (as ``conli check --json`` and ``jq`` write them: the opening
``{`` alone on its line, the closing ``}`` at the same indentation). A bare result is wrapped
as a record; batch's own error records (an unreadable input line has no id, only its
``line``) are failed records. A value that is not a valid record (``BatchRecord``) is
``Malformed``: skipped by the report, counted and listed by the line it starts on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, BinaryIO

from pydantic import BaseModel, Discriminator, Tag, ValidationError, model_validator

from conli.models import CheckResult
from conli.run.doors import JudgeOnlyResult

Record = dict[str, Any]
_MAX_OFFSET = 10_000_000  # far past any response conli checks; bounds a rebuilt response
_OPENERS = {b"{": b"}", b"[": b"]"}


def _result_kind(value: Any) -> str:
    """Tell the result types apart as the report does: judge mode's result has ``judge``."""
    return "judge" if isinstance(value, dict) and "judge" in value else "check"


AnyResult = Annotated[
    Annotated[CheckResult, Tag("check")] | Annotated[JudgeOnlyResult, Tag("judge")],
    Discriminator(_result_kind),
]


class Failure(BaseModel):
    """What a failed record says went wrong."""

    type: str
    message: str


class BatchRecord(BaseModel):
    """One record of ``conli batch`` output, as the report reads it; validated strictly."""

    id: str | int | None = None  # None only on batch's record of an unreadable input line
    line: int | None = None  # that input line's number
    mode: str | None = None
    source: Any = None  # shown only if a string, like the response
    response: Any = None
    ok: bool = True
    result: AnyResult | None = None
    error: Failure | None = None

    @model_validator(mode="after")
    def _complete(self) -> BatchRecord:
        """An id (or an input line), a result if ok, an error if not; sane sentence offsets."""
        if self.id is None and self.line is None:
            raise ValueError("a record needs an id (or, for an unreadable input line, its line)")
        if self.ok and self.result is None:
            raise ValueError("a record with ok true needs a result")
        if not self.ok and self.error is None:
            raise ValueError("a record with ok false needs an error")
        if isinstance(self.result, CheckResult) and not all(
            0 <= s.start <= s.end <= _MAX_OFFSET for s in self.result.sentences
        ):
            raise ValueError("sentence offsets out of range")
        return self


@dataclass(frozen=True)
class Malformed:
    """A value in the results file that is not a valid record, and why; the report skips it."""

    line: int
    reason: str


def _first_error(exc: ValidationError) -> str:
    """The first problem pydantic found, as ``where: what``, and how many more there are."""
    errors = exc.errors(include_url=False)
    where = ".".join(str(part) for part in errors[0]["loc"]) or "record"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {errors[0]['msg']}{more}"


def parse(text: bytes, number: int) -> Record | Malformed:
    """The record in ``text`` (starting on line ``number``) if valid; a bare result is wrapped.

    A lone surrogate (JSON may escape one; no page can hold it) becomes U+FFFD, so one
    odd id or text costs its record nothing and the report nothing.
    """
    try:
        data = _whole(json.loads(text))
    except (ValueError, RecursionError) as exc:
        return Malformed(number, f"not valid JSON: {exc}")
    if not isinstance(data, dict):
        return Malformed(number, "not a JSON object")
    if "result" not in data and "id" not in data and ("sentences" in data or "judge" in data):
        data = {"id": f"line {number}", "ok": True, "result": data}  # conli check --json
    try:
        BatchRecord.model_validate(data, strict=True)
    except ValidationError as exc:
        return Malformed(number, _first_error(exc)[:300])
    return data


_SURROGATE = re.compile("[\ud800-\udfff]")


def _whole(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) made U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_whole(item) for item in value]
    if isinstance(value, dict):
        return {_whole(key): _whole(item) for key, item in value.items()}
    return value


def _indent(line: bytes) -> int:
    return len(line) - len(line.lstrip(b" \t"))


def _values(handle: BinaryIO) -> Iterator[tuple[int, bytes | None]]:
    """Each value's first line number and text; ``None`` for one whose closing line never came.

    A line that is only ``{`` or ``[`` opens an indented value: the lines indented deeper
    belong to it, and the first line back at its indentation closes it (or, if it is not the
    closing bracket, leaves it unclosed and starts afresh). Any other line is one value.
    """
    start, indent, closer, held = 0, 0, b"", b""
    for number, line in enumerate(handle, 1):
        if held:
            if not line.strip() or _indent(line) > indent:
                held += line
                continue
            if line.lstrip(b" \t").startswith(closer):
                yield start, held + line
                held = b""
                continue
            yield start, None
            held = b""
        body = line.strip()
        if body in _OPENERS:
            start, indent, closer, held = number, _indent(line), _OPENERS[body], line
        elif body:
            yield number, line
    if held:
        yield start, None


def iter_results(path: Path) -> Iterator[Record | Malformed]:
    """Yield each value's record as read, or ``Malformed`` if it is not a valid one.

    Ids are made unique (``_unique_id``), so each record has its own name on the page.
    """
    seen: set[str] = set()
    with path.open("rb") as handle:
        for number, text in _values(handle):
            if text is None:
                yield Malformed(number, "not valid JSON: the value that starts here never ends")
                continue
            record = parse(text, number)
            if not isinstance(record, Malformed):
                _unique_id(record, number, seen)
            yield record


def _unique_id(record: Record, number: int, seen: set[str]) -> None:
    """Name a record whose id came before (OUT files concatenated) ``ID (line N)``.

    Every record is shown, none merged or dropped; the repeat's line tells the two apart,
    and the marks downloaded from the page keep one id per sentence (``conli calibrate``
    refuses a repeated id).
    """
    if record.get("id") is None:
        return
    name = str(record["id"])
    if name in seen:
        name = f"{name} (line {number})"
        record["id"] = name
    seen.add(name)


def record_name(record: Record) -> str:
    """How the report names a record: its id, or the input line batch could not read."""
    if record.get("id") is None:
        return f"input line {record.get('line')}"
    return str(record["id"])
