"""Turn user bytes into checkable text, or refuse with a clear error before any model call.

``validate_text`` is the one check every front door (CLI, batch, service, eval, library)
applies to a source or response, so a text one door refuses, every door refuses. The points
a response must cover (seed 001) are read here too: a JSON list of strings, or perspectives
``{"name": [points]}`` (a list is one perspective called ``points``), each point checked as
a source is. Several sources (a list) are joined into the one text the models read, with a
``SourceMap`` to trace spans back to their own source.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conli.errors import EmptyInputError, EncodingError, InputError, InputTooLargeError
from conli.run.documents import DocumentLike, document_chunk, is_document

# C0 controls other than tab, newline, vertical tab, form feed and carriage return, and
# DEL: no prose contains them, and a terminal or a model would act on them as commands.
_CONTROL = re.compile(r"[\x01-\x08\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# The setting that raises each text's limit, named in the refusal (points have a fixed one).
LIMIT_SETTINGS = {"source": "CONLI_MAX_SOURCE_CHARS", "question": "CONLI_MAX_SOURCE_CHARS",
                  "sources": "CONLI_MAX_SOURCE_CHARS", "response": "CONLI_MAX_RESPONSE_CHARS"}
MAX_SOURCES = 1_000  # chunks in one check; their joined length has the source's limit
MAX_NAME_CHARS = 200  # a chunk's name (a Document's id or metadata key), shown, never read
# What a check reads a response against: one text, or several (a RAG app's chunks), each a
# text or a LangChain ``Document`` (``conli.run.documents``: read without importing LangChain).
Source = str | DocumentLike | Sequence[str | DocumentLike | Mapping[str, Any]]


READ_CHUNK = 1 << 16  # bytes read at a time from a file or stdin
_BOM = b"\xef\xbb\xbf"


def _binary(name: str) -> EncodingError:
    return EncodingError(f"{name} looks binary (it contains NUL bytes); give UTF-8 text")


def _not_utf8(name: str, at: int, byte: bytes) -> EncodingError:
    return EncodingError(f"{name} is not valid UTF-8 (byte {at}: {byte!r}); convert it, "
                         "e.g. iconv -f latin1 -t utf-8")


def decode_text(data: bytes, *, name: str) -> str:
    """Strict UTF-8 (a BOM is allowed); NUL bytes mean binary, which we refuse."""
    if b"\x00" in data:
        raise _binary(name)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _not_utf8(name, exc.start, data[exc.start : exc.start + 1]) from exc


def read_input(path: str, name: str, *, max_chars: int) -> str:
    """Read a file (``-`` is stdin) as strict UTF-8, for a command-line front door.

    Read in chunks and never past ``max_chars`` characters and one more: a longer file,
    an endless pipe (``yes |``) or ``/dev/zero`` is refused at once, never read whole.
    """
    text = read_capped(path, name, max_chars)
    if len(text) > max_chars:
        raise too_large(name, max_chars)
    return text


def read_capped(path: str, name: str, max_chars: int) -> str:
    """The file's text, stopped once it holds more than ``max_chars`` characters.

    NUL bytes and invalid UTF-8 are refused as ``decode_text`` refuses them, the byte
    counted from the file's start.
    """
    import codecs
    import sys

    decoder = codecs.getincrementaldecoder("utf-8")()
    parts: list[str] = []
    count = offset = 0
    try:
        handle = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"cannot read {name} file {path!r}: {exc.strerror}") from exc
    try:
        while count <= max_chars:
            chunk = handle.read(READ_CHUNK)
            if offset == 0 and chunk.startswith(_BOM):
                chunk, offset = chunk[len(_BOM):], len(_BOM)
            if b"\x00" in chunk:
                raise _binary(name)
            pending = decoder.getstate()[0]
            try:
                text = decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                at = offset - len(pending) + exc.start
                raise _not_utf8(name, at, (pending + chunk)[exc.start:exc.start + 1]) from exc
            parts.append(text)
            count += len(text)
            offset += len(chunk)
            if not chunk:
                break
    except OSError as exc:
        raise InputError(f"cannot read {name} file {path!r}: {exc.strerror}") from exc
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()
    return "".join(parts)


def too_large(name: str, max_chars: int, *, count: int | None = None) -> InputTooLargeError:
    """The refusal of ``name`` past ``max_chars``, naming the setting that raises it.

    ``count`` is its length if it was read whole; None if reading stopped at the limit.
    """
    setting = LIMIT_SETTINGS.get(re.split(r"[\[ ]", name)[0])  # sources[3], source 'a.txt'
    hint = f"; raise {setting} if you mean it" if setting else ""
    size = f"{count:,}" if count is not None else f"more than {max_chars:,}"
    cut = "" if count is not None else " (it was not read further)"
    return InputTooLargeError(f"{name} has {size} characters, over the limit of "
                              f"{max_chars:,}{cut}{hint}")


def validate_text(text: object, *, name: str, max_chars: int) -> str:
    """Refuse empty, binary-looking, unencodable, control-laden or oversized text.

    Returns the text unchanged: nothing is silently cleaned, so offsets into it hold.
    """
    if text is None:
        raise InputError(f"{name} is missing")
    if not isinstance(text, str):
        raise EncodingError(f"{name} must be text (a string), got {type(text).__name__}")
    if "\x00" in text:
        raise EncodingError(f"{name} contains NUL characters; give plain text")
    surrogate = _SURROGATE.search(text)
    if surrogate:
        raise EncodingError(
            f"{name} is not valid Unicode: a lone surrogate (U+{ord(surrogate.group()):04X}) "
            f"at character {surrogate.start()}"
        )
    control = _CONTROL.search(text)
    if control:
        raise EncodingError(
            f"{name} contains the control character U+{ord(control.group()):04X} at character "
            f"{control.start()}; give plain text"
        )
    if not text.strip():
        raise EmptyInputError(f"{name} is empty")
    if len(text) > max_chars:
        raise too_large(name, max_chars, count=len(text))
    return text


SOURCE_JOINER = "\n\n"


def read_sources(paths: Sequence[str], *, max_chars: int) -> str | list[str]:
    """Read one source file as its text, several as a list (``--source`` repeated).

    Several are read within their joined limit: reading stops once the files read so far
    hold more than ``max_chars`` characters joined, as ``validate_sources`` would refuse.
    """
    if len(paths) == 1:
        return read_input(paths[0], "source", max_chars=max_chars)
    texts: list[str] = []
    left = max_chars
    for path in paths:
        text = read_capped(path, f"source {path!r}", max(left, 0))
        if len(text) > left:
            raise InputTooLargeError(
                f"sources have more than {max_chars:,} characters joined, over the limit of "
                f"{max_chars:,} (reading stopped in {path!r}); raise "
                f"{LIMIT_SETTINGS['source']} if you mean it")
        texts.append(text)
        left -= len(text) + len(SOURCE_JOINER)
    return texts


@dataclass(frozen=True)
class SourceMap:
    """Where each source starts in the joined text the models read (``starts[0]`` is 0).

    Several sources (a RAG app's retrieved chunks) are read as one text, joined by a blank
    line in order: a check of several costs what a check of their joined text costs, and
    keeps one prompt prefix for the prompt cache. One source is the map ``(0,)``.
    """

    starts: tuple[int, ...] = (0,)
    names: tuple[str | None, ...] = ()  # each chunk's name (a Document's), if any is named

    @classmethod
    def joined(cls, chunks: Sequence[str],
               names: Sequence[str | None] = ()) -> tuple[str, SourceMap]:
        """The chunks joined by a blank line, and where each one starts (and its name)."""
        starts, at = [], 0
        for chunk in chunks:
            starts.append(at)
            at += len(chunk) + len(SOURCE_JOINER)
        named = tuple(names) if any(name is not None for name in names) else ()
        return SOURCE_JOINER.join(chunks), cls(tuple(starts), named)

    def name(self, index: int) -> str | None:
        """The name of source ``index`` (None: unnamed)."""
        return self.names[index] if index < len(self.names) else None

    def place(self, start: int, end: int) -> tuple[int, int, int]:
        """``(source, start, end)`` of a joined-text span, within the source it starts in.

        A span that runs past its source's end (across the joiner) is cut there.
        """
        index = bisect_right(self.starts, start) - 1
        offset = self.starts[index]
        if index + 1 < len(self.starts):
            end = min(end, self.starts[index + 1] - len(SOURCE_JOINER))
        return index, start - offset, end - offset


@dataclass(frozen=True)
class CheckInput:
    """A source and response (and optional question) that passed ``validate_text``.

    Built once by ``check_input`` at the front door that received the texts; the pipeline
    takes only this type, so no text reaches a model unvalidated and none is validated twice.
    """

    source: str  # several sources arrive joined (``source_map`` says where each starts)
    response: str
    question: str | None = None
    points: dict[str, list[str]] | None = None
    source_map: SourceMap = field(default_factory=SourceMap)


def check_input(
    source: object,
    response: object,
    *,
    max_source_chars: int,
    max_response_chars: int,
    question: object = None,
    points: object = None,
    name_key: str | None = None,
) -> CheckInput:
    """Validate the texts of one check; ``InputError`` names the first problem.

    ``source`` is one text or a list of texts (``sources``: each validated, and their
    joined length held to ``max_source_chars``); a LangChain ``Document`` stands for its
    text, named by ``name_key`` (``validate_sources``).
    """
    joined, where = validate_sources(source, max_source_chars, name_key=name_key)
    return CheckInput(
        source=joined,
        source_map=where,
        response=validate_text(response, name="response", max_chars=max_response_chars),
        question=None if question is None else validate_text(
            question, name="question", max_chars=max_source_chars
        ),
        points=None if points is None else parse_points(points),
    )


def validate_sources(source: object, max_chars: int, *,
                     name_key: str | None = None) -> tuple[str, SourceMap]:
    """One source validated as it is, or a list of sources each validated and joined.

    A LangChain ``Document`` (or its dumped mapping), alone or in the list, is a chunk: its
    ``page_content`` is validated as a text, and its name (``metadata[name_key]``, else
    its id: ``conli.run.documents``) goes in the map.
    """
    if is_document(source):
        source = [source]
    if not isinstance(source, list | tuple):
        return validate_text(source, name="source", max_chars=max_chars), SourceMap()
    if not source:
        raise EmptyInputError("sources is an empty list")
    if len(source) > MAX_SOURCES:
        raise InputTooLargeError(f"sources has {len(source)} items, over the limit of "
                                 f"{MAX_SOURCES}")
    chunks: list[str] = []
    names: list[str | None] = []
    for i, item in enumerate(source):
        text, label = document_chunk(item, name_key)
        name = _chunk_name(label, i)
        if not isinstance(text, str) and text is not None:
            raise EncodingError(f"sources[{i}] must be text (a string) or a LangChain "
                                f"Document, got {type(text).__name__}")
        shown = f"sources[{i}]" if name is None else f"sources[{i}] ({name!r})"
        chunks.append(validate_text(text, name=shown, max_chars=max_chars))
        names.append(name)
    joined, where = SourceMap.joined(chunks, names)
    if len(joined) > max_chars:
        raise InputTooLargeError(
            f"sources have {len(joined):,} characters joined, over the limit of "
            f"{max_chars:,}; raise {LIMIT_SETTINGS['source']} if you mean it")
    return joined, where


def _chunk_name(label: object, index: int) -> str | None:
    """A document's name as a result shows it: a string or an integer, as text; else refused."""
    if label is None:
        return None
    if isinstance(label, bool) or not isinstance(label, str | int):
        raise InputError(f"sources[{index}]'s name (its id or metadata key) must be a string "
                         f"or an integer, got {type(label).__name__}")
    return validate_text(str(label), name=f"sources[{index}]'s name", max_chars=MAX_NAME_CHARS)


# --- points --------------------------------------------------------------------------------

Points = dict[str, list[str]]
DEFAULT_PERSPECTIVE = "points"
MAX_POINTS = 200
MAX_POINT_CHARS = 2_000
MAX_POINTS_FILE_CHARS = 2 * MAX_POINTS * MAX_POINT_CHARS  # a points file read past this is refused


def parse_points(data: object, *, name: str = "points") -> Points:
    """Validate points given as a list of strings or ``{perspective: [strings]}``.

    Every point passes the same text check as a source; an empty list, an empty
    perspective or more than ``MAX_POINTS`` points is refused, nothing is dropped.
    """
    if isinstance(data, list):
        data = {DEFAULT_PERSPECTIVE: data}
    if not isinstance(data, dict):
        raise InputError(f"{name} must be a JSON list of strings or an object of lists, "
                         f"got {type(data).__name__}")
    if not data:
        raise EmptyInputError(f"{name} is empty")
    points: Points = {}
    for perspective, items in data.items():
        label = validate_text(perspective, name=f"{name} perspective name", max_chars=200)
        if not isinstance(items, list):
            raise InputError(f"{name}[{label!r}] must be a list of strings")
        if not items:
            raise EmptyInputError(f"{name}[{label!r}] is empty")
        points[label] = [validate_text(item, name=f"{name}[{label!r}][{i}]",
                                       max_chars=MAX_POINT_CHARS) for i, item in enumerate(items)]
    total = sum(len(items) for items in points.values())
    if total > MAX_POINTS:
        raise InputTooLargeError(f"{name} has {total} points, over the limit of {MAX_POINTS}")
    return points


def read_points(text: str, *, name: str = "points") -> Points:
    """Parse a points file's text (JSON)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name} is not valid JSON: {exc.msg} at line {exc.lineno}") from exc
    return parse_points(data, name=name)


def point_list(points: Mapping[str, list[str]]) -> list[tuple[str, int, str]]:
    """(perspective, index, text) of every point, in order."""
    return [(p, i, text) for p, items in points.items() for i, text in enumerate(items)]
