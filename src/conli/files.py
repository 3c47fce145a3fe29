"""Write a whole file or nothing, and append-only JSON Lines logs that survive a crash.

``write_atomically``: a temp file in the target's folder, renamed into place, so readers
(and a crash mid-write) never see a torn file. ``read_log`` / ``LogAppender``: the
resumable outputs of ``conli batch`` and ``conli eval detect``, one fsynced line per
record; a crash can tear only the last line, which the next reader cuts off.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, TextIO, TypeVar

from conli.errors import InputError

T = TypeVar("T")


@contextmanager
def atomic_writer(path: Path, *, mode: int = 0o644) -> Iterator[TextIO]:
    """Yield a text handle; on success the file appears at ``path`` with ``mode``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:32]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
        os.chmod(tmp, mode)  # mkstemp makes it 0600; outputs are meant to be read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole, or leave ``path`` as it was."""
    with atomic_writer(path) as handle:
        handle.write(text)


def read_log(path: Path, parse: Callable[[Any], T]) -> list[T]:
    """``parse`` of every record in the log at ``path``; repairs a crash's torn last line.

    A last line that does not parse is cut off (its record runs again); one that parses but
    lacks its newline is completed, so appends stay clean. A bad line before the end is
    not a crash's doing: ``InputError``.
    """
    if not path.exists():
        return []
    records: list[T] = []
    good_end = 0
    with path.open("rb+") as handle:
        lines = handle.read().split(b"\n")
        offset = 0
        for number, line in enumerate(lines, 1):
            last = number == len(lines)
            end = offset + len(line) + (0 if last else 1)
            if line.strip():
                try:
                    records.append(parse(json.loads(line)))
                except (ValueError, KeyError, TypeError) as exc:
                    if not last and any(rest.strip() for rest in lines[number:]):
                        raise InputError(
                            f"line {number} of {path} is not a result record; fix or remove it"
                        ) from exc
                    break
                if last:  # parsed, but no newline: complete it rather than cut it
                    handle.seek(end)
                    handle.write(b"\n")
                    end += 1
            good_end = end
            offset = end
        handle.truncate(good_end)
    return records


class LogAppender:
    """Appends whole JSON lines to a log, each flushed and fsynced before the next."""

    def __init__(self, path: Path) -> None:
        created = not path.exists()
        self._handle: BinaryIO = path.open("ab")
        if created:  # make the new file's directory entry durable too
            _fsync_dir(path.parent)

    def write(self, record: Any) -> None:
        """Append ``record`` as one line."""
        line = json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"
        self._handle.write(line)
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Close the log."""
        self._handle.close()


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory or Path("."), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
