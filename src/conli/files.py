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
def atomic_path(path: Path, *, mode: int = 0o644) -> Iterator[Path]:
    """Yield a temp path beside ``path``; on success it is renamed to ``path`` with ``mode``.

    For writers that want a file name rather than a handle (numpy's memory maps); on any
    error the temp file is removed and ``path`` is left as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:32]}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, mode)  # mkstemp makes it 0600; outputs are meant to be read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def atomic_writer(path: Path, *, mode: int = 0o644) -> Iterator[TextIO]:
    """Yield a text handle; on success the file appears at ``path`` with ``mode``."""
    with atomic_path(path, mode=mode) as tmp, tmp.open("w", encoding="utf-8") as handle:
        yield handle


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
        self._handle.write(json_line(record))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Close the log."""
        self._handle.close()


def json_line(record: Any) -> bytes:
    """``record`` as one UTF-8 JSON line; text that cannot be UTF-8 is written escaped.

    A lone surrogate (valid in a Python string, never in UTF-8) would otherwise make the
    write fail; as a JSON escape (backslash, u, four hex digits) the line stays readable.
    """
    try:
        return json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(record, ensure_ascii=True).encode("ascii") + b"\n"


def ensure_writable(path: Path) -> None:
    """Refuse, before any work, a path ``write_atomically`` could not replace.

    The folder must exist (a typo is not silently created) and take a new file, and the
    path must not be a folder.
    """
    _parent_ready(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".conli-probe-")
    except OSError as exc:
        raise InputError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from exc
    os.close(fd)
    os.unlink(tmp)


def ensure_creatable(path: Path) -> None:
    """Refuse, before any work, a path ``write_atomically`` could not create, folders and all.

    For reports a CI asks for (``--junit reports/conli.xml`` on a fresh clone): the missing
    folders are made when the file is written; here the nearest folder that exists must take
    them, and nothing on the way may be a file.
    """
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing == path.parent:
        ensure_writable(path)
        return
    if not existing.is_dir():
        raise InputError(f"cannot write {str(path)!r}: {str(existing)!r} is not a folder")
    try:
        fd, tmp = tempfile.mkstemp(dir=existing, prefix=".conli-probe-")
    except OSError as exc:
        raise InputError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from exc
    os.close(fd)
    os.unlink(tmp)


def ensure_appendable(path: Path) -> None:
    """Refuse, before any work, a path ``LogAppender`` could not append to.

    A path that does not exist yet is not created here (a run refused later, before any
    record, leaves nothing behind): its folder must take a new file.
    """
    if not path.exists():
        ensure_writable(path)
        return
    _parent_ready(path)
    try:
        with path.open("ab"):
            pass
    except OSError as exc:
        raise InputError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from exc


def _parent_ready(path: Path) -> None:
    if path.is_dir():
        raise InputError(f"cannot write {str(path)!r}: it is a folder")
    parent = path.parent
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        raise InputError(f"cannot write {str(path)!r}: {str(parent)!r} {what}")


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
