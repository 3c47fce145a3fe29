"""IN as a table or a pipe: a CSV, a Parquet file or stdin, staged as the JSONL both engines read.

``conli batch`` reads JSON lines, twice (once to schedule, once to run) and by offset, so a
CSV, a Parquet file or ``-`` (stdin, in any of the three formats) is first written to a
temporary JSONL file, one line a row, removed when the run ends. The format is the file's
suffix (``.csv``, ``.parquet``/``.pq``, anything else JSONL) or ``--input-format``.

A table's columns are read by conli's names or RAGAS' and DeepEval's (``conli.run.table``);
one that has no source or no response column is refused before any model call, naming its
columns. A row's id is its ``id`` cell, else its number (1 for the first row after the
header), so a re-run resumes by row. In a CSV every cell is text: an empty cell is no value,
``points`` is JSON, and a list column of the peers (``retrieved_contexts``,
``retrieval_context``, ``context``) holds a JSON list or the Python list pandas writes;
``source`` is one text. Parquet keeps its types (lists, nulls, integer ids); it needs
pyarrow (the ``[data]`` extra). Nothing is half-written: a file that is not UTF-8 or not
a table fails the whole run (exit 2) before any check.
"""

from __future__ import annotations

import ast
import csv
import json
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Literal

from conli.errors import ConfigError, EncodingError, InputError, install_hint
from conli.files import json_line
from conli.run.table import FIELDS, READ, missing

InputFormat = Literal["jsonl", "csv", "parquet"]
INPUT_FORMATS: tuple[InputFormat, ...] = ("jsonl", "csv", "parquet")
_SUFFIXES: dict[str, InputFormat] = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
LIST_COLUMNS = frozenset({"retrieved_contexts", "retrieval_context", "context"})
_CELL_LIMIT = 1 << 30  # csv's own default (128 KiB) is below a long source


def input_format(path: str, given: str | None) -> InputFormat:
    """IN's format: ``--input-format`` if given, else its suffix (``-``: JSONL)."""
    if given is not None:
        return given  # type: ignore[return-value]  # argparse's choices
    return _SUFFIXES.get(Path(path).suffix.lower(), "jsonl")


def needs_staging(path: str, form: InputFormat) -> bool:
    """Whether IN must be staged: stdin, or a format other than JSONL."""
    return path == "-" or form != "jsonl"


@contextmanager
def staged(path: str, form: InputFormat) -> Iterator[Path]:
    """A JSONL file holding IN's records, for the run's duration (IN itself if it is one)."""
    if not needs_staging(path, form):
        yield Path(path)
        return
    with tempfile.TemporaryDirectory(prefix="conli-batch-") as folder:
        target = Path(folder) / "in.jsonl"
        source = Path(path)
        if path == "-":
            source = Path(folder) / "stdin"
            with source.open("wb") as copy:
                shutil.copyfileobj(sys.stdin.buffer, copy)
        if form == "jsonl":
            yield source
            return
        rows = _csv_rows(source) if form == "csv" else _parquet_rows(source)
        with target.open("wb") as out:
            for record in rows:
                out.write(json_line(record))
        yield target


def _records(columns: list[str], rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Each row as a record: its id (the ``id`` cell, else its number) and its cells."""
    for field in ("source", "response"):
        if not set(FIELDS[field]) & set(columns):
            raise InputError(f"IN has no {field} column (its columns: {columns}); name one "
                             f"{' or '.join(FIELDS[field])}")
    for number, row in enumerate(rows, 1):
        cells = {name: value for name, value in row.items()
                 if name in READ and not missing(value)}
        yield {"id": row.get("id") if "id" in columns else number, **cells}


def _csv_rows(path: Path) -> Iterator[dict[str, Any]]:
    """A CSV's rows as records (strict UTF-8; a NUL byte or a malformed row is refused)."""
    csv.field_size_limit(_CELL_LIMIT)
    with _open_text(path) as handle:
        reader = csv.DictReader(handle)
        try:
            columns = [str(c) for c in reader.fieldnames or []]
            yield from _records(columns, ({k: _cell(k, v) for k, v in row.items()
                                           if isinstance(k, str)} for row in reader))
        except UnicodeDecodeError as exc:
            raise EncodingError(f"IN is not valid UTF-8 (near line {reader.line_num + 1}); "
                                "convert it, e.g. iconv -f latin1 -t utf-8") from exc
        except csv.Error as exc:
            raise InputError(f"IN is not a CSV file conli can read (line "
                             f"{reader.line_num}): {exc}") from exc


def _open_text(path: Path) -> IO[str]:
    try:
        return path.open(encoding="utf-8-sig", errors="strict", newline="")
    except OSError as exc:
        raise InputError(f"cannot read input file {str(path)!r}: {exc.strerror}") from exc


def _cell(column: str, value: str | None) -> object:
    """A CSV cell as its record value: empty is none, points are JSON, list columns lists."""
    if value is None or value == "":
        return None
    if column == "points":
        try:
            return json.loads(value)
        except ValueError:
            return value  # the check refuses it, naming points
    if column in LIST_COLUMNS:
        return _listed(value)
    return value


def _listed(value: str) -> object:
    """A JSON list, or a Python list literal, of strings; else the text as one chunk."""
    for parse in (json.loads, ast.literal_eval):
        try:
            parsed = parse(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(parsed, list) and all(isinstance(item, str) for item in parsed):
            return parsed
    return value


def _parquet_rows(path: Path) -> Iterator[dict[str, Any]]:
    """A Parquet file's rows as records, a batch at a time (pyarrow: the ``[data]`` extra)."""
    try:
        import pyarrow.parquet as parquet
    except ImportError as exc:
        raise ConfigError(f"reading Parquet needs pyarrow: {install_hint('data')}") from exc
    try:
        table = parquet.ParquetFile(path)
    except Exception as exc:  # pyarrow's own errors (not Parquet, truncated)
        raise InputError(f"IN is not a Parquet file conli can read: {exc}") from exc
    columns = [str(name) for name in table.schema_arrow.names]
    rows = (row for batch in table.iter_batches() for row in batch.to_pylist())
    yield from _records(columns, rows)
